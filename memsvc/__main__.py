import sys

from memsvc.cli import main

sys.exit(main())
