"""Arms of several seeds side by side (mean line, min-max band); see rlve/cli/compare.py or --help.

    python scripts/compare_runs.py --arm adaptive runs/a/seed* --arm static runs/s/seed* \
        --metrics reward/mean --out runs/compare.png
"""

from rlve.cli.compare import main

if __name__ == "__main__":
    main()
