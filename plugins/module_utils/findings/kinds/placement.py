# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where GPU work fits (gpu_placement): why a GPU pod is pending or a manifest's pods would not fit,
GPUs stranded in a pool, and what the view cannot know. The checks that find them are in placement/."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_PLACEMENT, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING

PLACEMENT = (CHECK_PLACEMENT,)

KINDS = (
    Kind(
        id="placement.fits_now",
        severity=INFO,
        title="Fits now",
        message="{gpus} {resource} per pod fits now on {count} node(s): {nodes}",
        remedy="Nothing to do for resources; a pending pod that fits is waiting for the scheduler's next try, "
        "or is held by something the view does not model (see the other findings).",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.selector_matches_no_node",
        severity=ERROR,
        title="Its node selector or affinity matches no GPU node",
        message="it selects {selector}, which no GPU node carries; the values that exist: {existing}",
        remedy="Select a value that exists (kubectl get nodes -L <key>), or label the nodes meant for it "
        "(kubegpu.scheduling.gpu_node_label sets accelerator=<model>).",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.nodes_cordoned",
        severity=ERROR,
        title="Every GPU node it may use is cordoned",
        message="all {nodes} GPU node(s) its selector allows are cordoned (spec.unschedulable)",
        remedy="Uncordon a node (kubectl uncordon <node>) once it is healthy, or widen the pod's selector.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.taints_not_tolerated",
        severity=ERROR,
        title="Every GPU node it may use has a taint it does not tolerate",
        message="the {nodes} GPU node(s) its selector allows are cordoned or tainted: {taints}",
        remedy="Add a toleration for the taint to the pod (or its template), or remove the taint from the nodes "
        "meant for it (kubectl taint nodes <node> <key>:<effect>-).",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.resources_short",
        severity=ERROR,
        title="Nodes with enough free GPUs are short of something else",
        message="nodes with {gpus} free {resource} lack the rest it asks for: {short}; nearest {node}",
        remedy="Lower the pod's CPU or memory requests, or free the nearest node of pods that do not need its GPUs.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.fragmented",
        severity=WARNING,
        title="Enough free GPUs in total, but no node has enough",
        message="it asks for {gpus} {resource} on one node; {free} are free on the nodes it may use, at most "
        "{largest} on one ({node})",
        remedy="Ask for at most {largest} per pod, or move smaller GPU pods off {node} so that {gpus} free up on it.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.not_enough_gpus",
        severity=ERROR,
        title="Not enough free GPUs on the nodes it may use",
        message="it asks for {gpus} {resource}; only {free} are free on the nodes it may use, at most {largest} "
        "on one ({node})",
        remedy="Wait for GPU pods to finish, add GPU nodes, or ask for at most {largest}.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.claims_unallocatable",
        severity=ERROR,
        title="Its ResourceClaims cannot be allocated",
        message="none of the {nodes} node(s) it may use has free devices for its claims",
        remedy="Compare the claims' requests (kubectl describe resourceclaim) with the free devices in the "
        "ResourceSlices: too many devices asked for, a selector no device meets, or all such devices taken.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.other_scheduler",
        severity=INFO,
        title="Placed by another scheduler: cannot know",
        message="schedulerName {scheduler}: its plugins may decide differently from the default profile's, "
        "which is what this view models",
        remedy="Ask that scheduler (its own events and logs) why the pod waits.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.not_modelled",
        severity=INFO,
        title="Filters the view does not evaluate",
        message="it uses {filters}, which can rule out nodes the view counts",
        remedy="Read the pod's FailedScheduling event for what those filters say.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.claims_not_made",
        severity=INFO,
        title="Its claims are not made yet: cannot know",
        message="its ResourceClaim templates have no claims yet, so what they ask for is not known here",
        remedy="Check that kube-controller-manager runs (it makes the claims), then read again.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.stranded_gpus",
        severity=WARNING,
        title="Free GPUs that no GPU pod can use",
        message="pool {pool}: {gpus} free GPU(s) cannot take even a 1-GPU pod ({reasons})",
        remedy="Uncordon or untaint the nodes, or free their CPU, memory or pod slots; the per-node view names them.",
        checks=PLACEMENT,
    ),
    Kind(
        id="placement.pool_fragmented",
        severity=INFO,
        title="A pool's free GPUs are scattered",
        message="pool {pool}: {free} GPUs free, yet no {size}-GPU pod fits (at most {largest} on one node)",
        remedy="Pack smaller GPU pods onto fewer nodes (or let them finish) to free whole nodes for large jobs.",
        checks=PLACEMENT,
    ),
)
