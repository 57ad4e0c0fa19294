# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The option groups of module_utils/options/groups.py, one fragment a group:
kubegpu.scheduling.options.gpu_resources, .node_selection, .sources, .fail_on, .parallelism,
.page_size, .waiting, .eviction, .system_components (the model_labels group is documented by
kubegpu.scheduling.model_labels)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
"""

    GPU_RESOURCES = r"""
options:
  resource_names:
    description:
      - Extended resources that count as whole GPUs. MIG resources C(nvidia.com/mig-*) always count too.
      - The first name is the one findings speak of.
    type: list
    elements: str
    default: [nvidia.com/gpu]
"""

    NODE_SELECTION = r"""
options:
  names:
    description:
      - Only these nodes. A name that matches no node is reported.
    type: list
    elements: str
  label_selectors:
    description:
      - Only the nodes that match all of these label selectors, for example V(nvidia.com/gpu.present=true),
        as C(kubectl get nodes -l) takes them. Joined with C(,) into one selector.
    type: list
    elements: str
    default: []
"""

    SOURCES = r"""
options:
  src:
    description:
      - Files, directories (searched for C(.yaml), C(.yml) and C(.json) files, hidden ones skipped) or
        globs to read. One path may be given as a string.
    type: list
    elements: path
  definition:
    description:
      - The same given inline, as one object, a list of objects, or a YAML string (which may hold
        several documents).
    type: raw
"""

    FAIL_ON = r"""
options:
  fail_on:
    description:
      - The lowest severity of finding that fails the task. With V(never) the task only reports.
    type: str
    choices: [error, warning, never]
    default: error
"""

    PARALLELISM = r"""
options:
  parallelism:
    description:
      - How many nodes are worked on at once, from 1 to 256.
    type: int
    default: 16
"""

    PAGE_SIZE = r"""
options:
  page_size:
    description:
      - Items per page of each list call, at least 1.
    type: int
    default: 500
"""

    WAITING = r"""
options:
  wait:
    description:
      - Wait until what the task made is ready.
    type: bool
    default: true
  wait_timeout:
    description:
      - How long to wait, in seconds.
    type: int
    default: 300
"""

    EVICTION = r"""
options:
  evict:
    description:
      - Evict the pods that hold the GPUs taken out of service, through the Eviction API, so that
        PodDisruptionBudgets hold.
      - Without it the GPUs are only kept from new pods; the running pods stay.
    type: bool
    default: false
  eviction_timeout:
    description:
      - Seconds to keep trying the evictions a PodDisruptionBudget refuses, from the first eviction on.
    type: int
    default: 300
  force_delete:
    description:
      - Delete a pod its budget still keeps after O(eviction_timeout), past the budget.
    type: bool
    default: false
"""

    SYSTEM_COMPONENTS = r"""
options:
  system_components:
    description:
      - >-
        The GPU system components (device plugins, GPU Feature Discovery, the MPS control daemon, the GPU
        Operator's operands, GKE's device plugin, driver installer, device injector and GPUDirect NCCL installers
        (RDMA with its container toolkit installer, TCPX, TCPXO), Koordinator's node agents, Alibaba's gpushare,
        Volcano's and HAMi's device plugins, the AMD and Intel GPU plugins, NVIDIA's and the Kubernetes example's
        DRA kubelet plugins) whose access to GPUs is on purpose.
        M(kubegpu.scheduling.gpu_pod_validate) allows their findings, each with the reason
        C(known GPU system component: <name>); M(kubegpu.scheduling.gpu_node_facts) does not count them as
        GPU use outside the scheduler.
      - A pod spec is a component by what it runs, not by its name, labels or namespace. Every container, init
        and ephemeral ones included, must run one of the component's images (matched by the tail of the image's
        repository path, so a private mirror of the same path matches; tag and digest ignored) with the image's
        own entrypoint or one of the component's published command lines. The same image run with another
        command is judged as any workload.
      - Quantity findings (V(KGPU4xx)) stay findings, as with the allow annotation, whose reason wins when an
        object carries both.
    type: dict
    default: {}
    suboptions:
      builtin:
        description:
          - Use the built-in catalogue. V(false) judges every pod, components included.
        type: bool
        default: true
      extra:
        description:
          - More components, each a dictionary with C(name), C(images) (repository paths such as
            V(acme/gpu-agent), matched at the tail), optionally C(commands) (each a list, the command then its args,
            as the component's manifest sets them; a last element V(...) lets any further arguments follow),
            C(entrypoint_args) (V(true) when the image's entrypoint is the component's binary, so args set without
            a command are its flags) and C(namespaces) (where it usually runs; information only).
        type: list
        elements: dict
        default: []
"""

    PROMETHEUS = r"""
options:
  prometheus:
    description:
      - Judge the GPU nodes' health also by the DCGM exporter's metrics, read from this Prometheus (or any server
        of its HTTP query API, such as Thanos Query, Mimir or VictoriaMetrics). For clusters where no cloud agent or
        NVSentinel writes GPU faults on the nodes, as on-premises clusters with the GPU Operator.
      - Four instant queries and one label-values read over the whole fleet, about one instant, whatever the
        number of nodes, sent together while the API server's lists are read.
      - A node turns failed or degraded by an XID that appeared within O(prometheus.window) (the exporter's
        C(DCGM_FI_DEV_XID_ERRORS) is the last XID seen and never resets, so it is judged by a change, and an XID
        of last month does not count; workload XIDs 13, 31, 43, 45 and 68 are listed apart and never a problem),
        uncorrectable ECC errors or uncorrectable remapped rows that rose within the window, a failed or pending
        row remap, pages pending retirement, or fewer GPUs in the metrics than the node should have.
      - A node is V(unknown), never healthy, when Prometheus cannot be read (unreachable, credentials refused, a
        query refused), when no series name the node, when a scrape target of the exporter for it is down, or when
        its newest sample is older than O(prometheus.stale_after). The run does not fail for that; the rest of
        the facts are returned, with the reason in each node's C(health.metrics.unknown) and in
        the fleet facts' C(metrics.error) and notes, and a warning.
      - A health metric that has no series while the exporter is up is not collected (ECC totals and retired
        pages are commented out of the exporter's default counters); a fleet problem names it with the counters-CSV
        line that turns it on.
    type: dict
    suboptions:
      url:
        description:
          - The server's URL, V(http://) or V(https://), with any path prefix it is served under, for example
            V(http://prometheus-operated.monitoring.svc:9090) or a Rancher or API server proxy path.
        type: str
        required: true
      bearer_token:
        description:
          - A bearer token sent as C(Authorization), as an OAuth proxy in front of Prometheus or a managed service
            takes it. Not with O(prometheus.username).
        type: str
      username:
        description:
          - The user name for HTTP basic authentication, with O(prometheus.password).
        type: str
      password:
        description:
          - The password for HTTP basic authentication.
        type: str
      ca_cert:
        description:
          - A CA bundle that signs the server's certificate.
        type: path
      client_cert:
        description:
          - A client certificate (PEM), for servers that require one; with O(prometheus.client_key) unless the
            file holds the key too.
        type: path
      client_key:
        description:
          - The client certificate's key (PEM).
        type: path
      validate_certs:
        description:
          - Check the server's certificate. Leave it on outside a test.
        type: bool
        default: true
      headers:
        description:
          - "More HTTP headers on every request, for example V({X-Scope-OrgID: gpu-team}) for a multi-tenant Mimir or
            Cortex."
        type: dict
        default: {}
      proxy:
        description:
          - An HTTP proxy for the requests. Without it, the C(http_proxy), C(https_proxy) and C(no_proxy)
            environment variables apply.
        type: str
      timeout:
        description:
          - Seconds to wait for each answer.
        type: int
        default: 30
      node_labels:
        description:
          - The labels that name a series' node, tried in order. The exporter's own is C(Hostname) (C(hostname)
            from its releases after 4.5); scrape configurations add C(kubernetes_node) or C(node) from the target.
        type: list
        elements: str
        default: [Hostname, hostname, kubernetes_node, node]
      window:
        description:
          - How far back a new XID or an increase of an error counter counts, as a Prometheus duration.
        type: str
        default: 10m
      job:
        description:
          - A regular expression for the C(job) label of the exporter's scrape targets, whose C(up) says when
            scrapes fail.
        type: str
        default: ".*dcgm.*"
      stale_after:
        description:
          - Seconds after which a node whose newest sample is older reads unknown.
        type: int
        default: 120
      recorded:
        description:
          - Read the series the recording rules of M(kubegpu.scheduling.gpu_alert_rules) keep (its option
            O(kubegpu.scheduling.gpu_alert_rules#module:record_window), equal to O(prometheus.window)) instead
            of evaluating every signal over every GPU; on fleets of thousands of GPU nodes, the queries then read
            a few thousand series. Without those series in Prometheus the read fails and the nodes read unknown.
        type: bool
        default: false
"""

    DRIVER_UPGRADE = r"""
options:
  driver_upgrade:
    description:
      - How each GPU node's driver view (C(driver)) is read and judged.
    type: dict
    default: {}
    suboptions:
      stuck_after:
        description:
          - Seconds a node may stay in an upgrade state whose start the GPU Operator's upgrade controller records
            (V(wait-for-jobs-required), V(validation-required)) before it is reported as stuck.
        type: int
        default: 3600
      read_objects:
        description:
          - Also list DaemonSets and C(NVIDIADrivers) (one list each; a cluster that does not serve C(NVIDIADrivers)
            gets a note), for the C(NVIDIADriver) that selects each node and whether its driver pod runs the
            DaemonSet's current pod template.
        type: bool
        default: false
"""
