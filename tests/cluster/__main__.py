import sys

from .cluster import main

sys.exit(main())
