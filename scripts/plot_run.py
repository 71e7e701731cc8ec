"""Plot a run's metrics.jsonl as PNGs; see rlve/cli/plot.py or --help.

python scripts/plot_run.py runs/<name>                       # runs/<name>/dashboard.png
python scripts/plot_run.py runs/<name> --metrics reward/mean,game/win --smooth 10
"""

from rlve.cli.plot import main

if __name__ == "__main__":
    main()
