"""``python -m adapter`` runs the ``opencode-tree`` command line."""

import sys

from .cli import main

sys.exit(main())
