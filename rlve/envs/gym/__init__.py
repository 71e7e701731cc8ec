"""Verifiable environments: procedurally generated problems with programmatic verifiers.

The interface (`verifiable`), the wrapper that makes one an rlve environment (`wrapper`), the
adapters for RLVE-Gym (`rlve_gym`) and reasoning-gym (`reasoning_gym`), our own (`builtin`), and
their registration (`sources`). Kept light on purpose: verifier workers import
`rlve.envs.gym.sandbox`, so nothing here imports Gym, reasoning_gym or torch.
"""
