"""python -m reports.gate: the gate's command (reports/gate/cli.py)."""

import sys

from reports.gate.cli import main

sys.exit(main())
