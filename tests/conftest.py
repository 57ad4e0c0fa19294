import os

from tests.collection import collections_root

# Ansible commands the tests start use this checkout, not a kubegpu.scheduling installed in ~/.ansible.
os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(collections_root())
