"""`python -m train`: see train/cli.py.

The garbage collector is paused from before the first import until the imports are done
(train/startup.py).
"""

import sys

from train.startup import pause_collector_for_imports

pause_collector_for_imports()

from train.cli import main  # noqa: E402  (after the pause, which covers its imports)

sys.exit(main())
