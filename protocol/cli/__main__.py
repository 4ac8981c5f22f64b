"""``python -m protocol.cli`` is ``fedhh`` (the network launcher starts processes so)."""
import sys

from protocol.cli import main

sys.exit(main())
