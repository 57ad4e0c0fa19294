"""Stand-in for pip's get-pip.py, for ansible-test's virtual environments on machines that reach
the Python package index but not other download sites: bootstrap pip from the standard library's
ensurepip, then install what ansible-test asked for with it.

ensurepip runs in its own process because it clears the PIP_* settings and pip's configuration
files of the process it runs in, and those (a CA bundle, an index) are needed for the install."""

import subprocess
import sys

GET_PIP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"], stdout=subprocess.DEVNULL)
args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade", *args]))
