import sys

from rlvitals.cli import main

sys.exit(main())
