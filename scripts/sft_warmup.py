"""SFT warm-up on teacher data: `python scripts/sft_warmup.py --help`."""

from rlve.cli.sft import warmup_main

if __name__ == "__main__":
    warmup_main()
