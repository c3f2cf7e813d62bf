"""`python -m bench [--quick] [--cases a,b] [--out FILE]`: see bench/run.py."""

import sys

from bench.run import main

sys.exit(main())
