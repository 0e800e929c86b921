import sys

from purgecheck.cli import main

sys.exit(main())
