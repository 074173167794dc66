"""`python -m proof.verify ...`: see `proof.verify.command`."""

import sys

from proof.verify.command import main

sys.exit(main())
