"""python -m reports.gate_trials: the name the committed trial records give for
reports/gate/trials.py (``python -m reports.gate.trials``), kept so that they still run."""

import sys

from reports.gate.trials import main

if __name__ == "__main__":
    sys.exit(main())
