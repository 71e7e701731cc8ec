"""Play teacher games and save them as SFT data: `python scripts/generate_sft_data.py --help`."""

from rlve.cli.sft import generate_main

if __name__ == "__main__":
    generate_main()
