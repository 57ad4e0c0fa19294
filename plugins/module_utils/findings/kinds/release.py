# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kinds of the release of quarantined nodes (gpu_node_release): why a node stays quarantined
(its proof failed, did not finish, could not run, or its patch failed), what a release leaves in
place because the collection did not set it, and nodes there is nothing to release on. Every hit's
``where`` names the node (``node``); a proof's hits name its pod (``pod``) too."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_RELEASE, Case, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING

RELEASE = (CHECK_RELEASE,)

NO_SUCH_NODE = "release.no_such_node"
NOT_QUARANTINED = "release.not_quarantined"
NOT_OURS = "release.not_ours"
CORDON_KEPT = "release.cordon_kept"
TAINT_KEPT = "release.taint_kept"
NO_GPU_TO_PROVE = "release.no_gpu_to_prove"
PROOF_FAILED = "release.proof_failed"
PROOF_TIMED_OUT = "release.proof_timed_out"
NEVER_SCHEDULED = "never_scheduled"  # the case of a proof pod the scheduler never placed
PROOF_POD_IN_THE_WAY = "release.proof_pod_in_the_way"
PROOF_NOT_RUN = "release.proof_not_run"
PATCH_FAILED = "release.patch_failed"

KINDS = (
    Kind(
        NO_SUCH_NODE,
        WARNING,
        "No such node",
        "there is no node named {node}",
        "Check the name (kubectl get nodes).",
        RELEASE,
    ),
    Kind(
        NOT_QUARANTINED,
        INFO,
        "Not quarantined by this collection",
        "{node} carries no quarantine record of this collection: nothing to release{cordoned}",
        "Nothing to do. A cordon someone else set is theirs to lift (kubectl uncordon {node}).",
        RELEASE,
    ),
    Kind(
        NOT_OURS,
        WARNING,
        "Quarantine marks this collection cannot prove it set",
        "{node}: {why}; left as it is",
        "Find out who set it. Only when the node is known to be healthy remove it by hand: {command}.",
        RELEASE,
    ),
    Kind(
        CORDON_KEPT,
        INFO,
        "A cordon someone else set stays",
        "{node} was already cordoned when it was quarantined: the release leaves it cordoned",
        "Whoever cordoned it lifts it (kubectl uncordon {node}) when their work is done.",
        RELEASE,
    ),
    Kind(
        TAINT_KEPT,
        INFO,
        "A taint someone else set stays",
        "{node} carried the taint {taint} before it was quarantined: the release leaves it",
        "Whoever set it removes it (kubectl taint nodes {node} {taint}-).",
        RELEASE,
    ),
    Kind(
        NO_GPU_TO_PROVE,
        ERROR,
        "No GPU the proof pod can request",
        "{node} has no {resource} in its capacity, so the proof pod cannot ask for its GPUs; it stays quarantined",
        "Check the device plugin on the node (kubegpu.scheduling.gpu_device_plugin_validate), or name the node's "
        "GPU resource in proof.resource.",
        RELEASE,
    ),
    Kind(
        PROOF_FAILED,
        ERROR,
        "The proof pod failed",
        "proof pod {pod} ended {phase} on {node} ({exit}); last log line: {last_line}; it stays quarantined",
        "Read the proof's log (logs in the result), repair the node, and run the release again.",
        RELEASE,
    ),
    Kind(
        PROOF_TIMED_OUT,
        ERROR,
        "The proof pod did not finish in time",
        "proof pod {pod} was still {phase} on {node} after {timeout}s ({detail}); it stays quarantined",
        "If the scheduler could not place it, its reason is above: a taint the proof does not tolerate (add it to "
        "proof.tolerations), GPUs withdrawn or held by other pods. Otherwise raise proof_timeout.",
        RELEASE,
        cases={
            NEVER_SCHEDULED: Case(
                message="proof pod {pod} was never scheduled onto {node} in {timeout}s ({detail}); it stays quarantined"
            )
        },
    ),
    Kind(
        PROOF_POD_IN_THE_WAY,
        ERROR,
        "A pod of the proof's name that this collection did not create",
        "pod {pod} exists and is not a proof pod of this collection; {node} stays quarantined",
        "Remove or rename that pod, or run the proof in another namespace (namespace option).",
        RELEASE,
    ),
    Kind(
        PROOF_NOT_RUN,
        ERROR,
        "The proof pod could not be run",
        "the proof pod {pod} could not be run on {node}: {error}; it stays quarantined",
        "Fix what the error names (permissions to create, read and delete pods in the proof's namespace, "
        "admission policies that refuse it), then run the release again.",
        RELEASE,
    ),
    Kind(
        PATCH_FAILED,
        ERROR,
        "The release patch failed",
        "the proof passed, but the patch of {node} failed: {error}; it stays quarantined",
        "Run the release again: the proof runs again and the node is read anew.",
        RELEASE,
    ),
)
