# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Other vendors' accelerators, as the node labels, instance types and resource names that place a
pod on them: such a node has no NVIDIA GPU, so a GPU label key such as ``accelerator`` there is no
sign of NVIDIA GPU use, and the host paths of the NVIDIA driver are not on it. Read alike by the
offline validator (Python regular expressions) and the admission policies (CEL's RE2): every
pattern keeps to the syntax both engines share.

Sources, as the projects publish them:
- Google TPU on GKE: node labels ``cloud.google.com/gke-tpu-accelerator`` (``tpu-v6e-slice``) and
  ``cloud.google.com/gke-tpu-topology``, machine types ``ct5lp-hightpu-4t``, resource ``google.com/tpu``.
- AWS Inferentia and Trainium (aws-neuron/aws-neuron-sdk src/k8/): instance types ``inf1``, ``inf2``,
  ``trn1``, ``trn1n``, ``trn2`` (``ml.`` before them on SageMaker), resources
  ``aws.amazon.com/neuron``, ``neuroncore`` and ``neurondevice``.
- Huawei Ascend (Ascend/ascend-device-plugin build/): node selector ``accelerator: huawei-Ascend910``,
  ``accelerator-type: card-910b-2``, resources ``huawei.com/Ascend910`` and ``huawei.com/Ascend310P``.
- Intel Gaudi (``habana.ai/gaudi``, AWS ``dl1``) and Intel GPUs (``gpu.intel.com/*``, NFD's
  ``intel.feature.node.kubernetes.io/gpu``); AMD Instinct (``amd.com/gpu``, NFD's
  ``feature.node.kubernetes.io/amd-gpu``); Cambricon MLU, Enflame GCU, Hygon DCU, Kunlunxin XPU.
"""

from __future__ import annotations

import re

# Case-insensitive, searched in "key=value" of a node label, an instance type or a resource name.
# "amd" alone is left out (kubernetes.io/arch=amd64), and so is "intel" (NFD's CPU vendor label).
OTHER_ACCELERATOR = (
    r"tpu(?:[-_.v0-9]|$)|ascend|\bnpu\b|neuron|inferentia|trainium|\b(?:ml\.)?(?:inf|trn)[0-9]+[a-z]*\.|"
    r"\bdl1\.|habana|gaudi|\bhpu\b|amd\.com|amd-gpu|instinct|\bmi[0-9]{3}[a-z]?\b|rocm|gpu\.intel\.com|"
    r"intel\.feature\.node|intel-gpu|cambricon|\bmlu|enflame|\bgcu\b|hygon|\bdcu\b|kunlunxin|\bxpu\b"
)
# A text that names NVIDIA is never another vendor's, whatever else it says.
NVIDIA_WORD = r"nvidia"
OTHER_ACCELERATOR_RE = re.compile(OTHER_ACCELERATOR, re.IGNORECASE)
NVIDIA_WORD_RE = re.compile(NVIDIA_WORD, re.IGNORECASE)


def names_other_accelerator(text: str) -> bool:
    """Whether a label ("key=value"), instance type or resource name names another vendor's
    accelerator and not NVIDIA."""
    return bool(OTHER_ACCELERATOR_RE.search(text)) and not NVIDIA_WORD_RE.search(text)


def requirement_names_other(key: str, values: list[str]) -> bool:
    """Whether a node requirement (key, and the values it must take) confines a pod to another
    vendor's accelerator nodes: the key names one, or every value does."""
    if names_other_accelerator(key):
        return True
    return bool(values) and all(names_other_accelerator(f"{key}={value}") for value in values)
