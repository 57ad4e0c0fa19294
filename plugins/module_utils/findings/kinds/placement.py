# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where GPU work fits (gpu_placement_info): why a GPU pod is pending or a manifest's pods would not fit,
GPUs stranded in a pool, and what the view cannot know. The checks that find them are in placement/."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_PLACEMENT, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING

PLACEMENT = (CHECK_PLACEMENT,)

KINDS = (
    Kind(
        "placement.fits_now",
        INFO,
        "Fits now",
        "{gpus} {resource} per pod fits now on {count} node(s): {nodes}",
        "Nothing to do for resources; a pending pod that fits is waiting for the scheduler's next try, "
        "or is held by something the view does not model (see the other findings).",
        PLACEMENT,
    ),
    Kind(
        "placement.fits_partly",
        ERROR,
        "Only some of its pods fit now",
        "{fit} of {replicas} pods of {gpus} {resource} fit now, on {nodes}; the other {pending} would stay Pending: "
        "{message}",
        "Ask for at most {fit} replicas, or make room for the rest: the sum names what rules out each node once "
        "the pods that fit are placed (GPUs all taken, a taint, a selector, too little CPU or memory).",
        PLACEMENT,
    ),
    Kind(
        "placement.selector_matches_no_node",
        ERROR,
        "Its node selector or affinity matches no GPU node",
        "it selects {selector}, which no GPU node carries; the values that exist: {existing}",
        "Select a value that exists (kubectl get nodes -L <key>), or label the nodes meant for it "
        "(kubegpu.scheduling.gpu_node_label sets accelerator=<model>).",
        PLACEMENT,
    ),
    Kind(
        "placement.nodes_cordoned",
        ERROR,
        "Every GPU node it may use is cordoned",
        "all {nodes} GPU node(s) its selector allows are cordoned (spec.unschedulable)",
        "Uncordon a node (kubectl uncordon <node>) once it is healthy, or widen the pod's selector.",
        PLACEMENT,
    ),
    Kind(
        "placement.taints_not_tolerated",
        ERROR,
        "Every GPU node it may use has a taint it does not tolerate",
        "the {nodes} GPU node(s) its selector allows are cordoned or tainted: {taints}",
        "Add a toleration for the taint to the pod (or its template), or remove the taint from the nodes "
        "meant for it (kubectl taint nodes <node> <key>:<effect>-).",
        PLACEMENT,
    ),
    Kind(
        "placement.resources_short",
        ERROR,
        "Nodes with enough free GPUs are short of something else",
        "nodes with {gpus} free {resource} lack the rest it asks for: {short}; nearest {node}",
        "Lower the pod's CPU or memory requests, or free the nearest node of pods that do not need its GPUs.",
        PLACEMENT,
    ),
    Kind(
        "placement.fragmented",
        WARNING,
        "Enough free GPUs in total, but no node has enough",
        "it asks for {gpus} {resource} on one node; {free} are free on the nodes it may use, at most "
        "{largest} on one ({node})",
        "Ask for at most {largest} per pod, or move smaller GPU pods off {node} so that {gpus} free up on it.",
        PLACEMENT,
    ),
    Kind(
        "placement.not_enough_gpus",
        ERROR,
        "Not enough free GPUs on the nodes it may use",
        "it asks for {gpus} {resource}; only {free} are free on the nodes it may use, at most {largest} "
        "on one ({node})",
        "Wait for GPU pods to finish, add GPU nodes, or ask for at most {largest}.",
        PLACEMENT,
    ),
    Kind(
        "placement.claims_unallocatable",
        ERROR,
        "Its ResourceClaims cannot be allocated",
        "none of the {nodes} node(s) it may use has free devices for its claims",
        "Compare the claims' requests (kubectl describe resourceclaim) with the free devices in the "
        "ResourceSlices: too many devices asked for, a selector no device meets, or all such devices taken.",
        PLACEMENT,
    ),
    Kind(
        "placement.other_scheduler",
        INFO,
        "Placed by another scheduler: cannot know",
        "schedulerName {scheduler}: its plugins may decide differently from the default profile's, "
        "which is what this view models",
        "Ask that scheduler (its own events and logs) why the pod waits.",
        PLACEMENT,
    ),
    Kind(
        "placement.not_modelled",
        INFO,
        "Filters the view does not evaluate",
        "it uses {filters}, which can rule out nodes the view counts",
        "Read the pod's FailedScheduling event for what those filters say.",
        PLACEMENT,
    ),
    Kind(
        "placement.claims_not_made",
        INFO,
        "Its claims are not made yet: cannot know",
        "its ResourceClaim templates have no claims yet, so what they ask for is not known here",
        "Check that kube-controller-manager runs (it makes the claims), then read again.",
        PLACEMENT,
    ),
    Kind(
        "placement.stranded_gpus",
        WARNING,
        "Free GPUs that no GPU pod can use",
        "pool {pool}: {gpus} free GPU(s) cannot take even a 1-GPU pod ({reasons})",
        "Uncordon or untaint the nodes, or free their CPU, memory or pod slots; the per-node view names them.",
        PLACEMENT,
    ),
    Kind(
        "placement.pool_fragmented",
        INFO,
        "A pool's free GPUs are scattered",
        "pool {pool}: {free} GPUs free, yet no {size}-GPU pod fits (at most {largest} on one node)",
        "Pack smaller GPU pods onto fewer nodes (or let them finish) to free whole nodes for large jobs.",
        PLACEMENT,
    ),
)
