# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


class ModuleDocFragment:
    """The node labels that name a GPU model (gpu_models.DEFAULT_MODEL_LABEL_KEYS)."""

    DOCUMENTATION = r"""
options:
  model_label_keys:
    description:
      - Node label keys that name the GPU model, in order of preference. The first that names a model
        gives the model; values such as V(nvidia) or V(true) name no model and are passed over.
    type: list
    elements: str
    default:
      - nvidia.com/gpu.product
      - aliyun.accelerator/nvidia_name
      - cloud.google.com/gke-accelerator
      - eks.amazonaws.com/instance-gpu-name
      - karpenter.k8s.aws/instance-gpu-name
      - k8s.amazonaws.com/accelerator
      - accelerator
"""
