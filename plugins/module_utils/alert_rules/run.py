# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_alert_rules on the write-module skeleton: the rules rendered from the options,
then written to a rules file (`to_file`: no client, no cluster needed) or applied to the cluster as
a PrometheusRule (`run`), or removed.

It owns only what it made. On the cluster the PrometheusRule carries the collection's mark and is
written as write/owned.py writes every owned object (someone else's of the same name is refused,
nothing written). A file carries a header line that says the module wrote it: a file without it is
someone else's, refused the same way, and left alone on removal. Nothing is written when nothing
changes, and nothing at all in check mode."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules import render
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import owned
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun

API_VERSION = "monitoring.coreos.com/v1"
RESOURCE = "prometheusrules"
OWNER = owned.Owner("kubegpu-alert-rules", {"PrometheusRule": RESOURCE})
RULES, PROMETHEUS_RULE = "rules", "prometheus_rule"
FORMATS = (RULES, PROMETHEUS_RULE)
# The first line of every file the module writes: what tells its files from anyone else's.
HEADER = "# Written by kubegpu.scheduling.gpu_alert_rules from the collection's DCGM signal table."
HEADER_TEXT = (
    f"{HEADER}\n# It rewrites this file on every run and removes it with state=absent: edit the task's options.\n"
)


def settings_of(params: Mapping[str, Any]) -> render.AlertSettings:
    names = ("window", "page_for", "ticket_for", "absent_for", "count_lookback", "runbook_base_url", "record_window")
    return render.AlertSettings(**{name: params[name] for name in names})


def rule_object(params: Mapping[str, Any], settings: render.AlertSettings) -> dict[str, Any]:
    """The PrometheusRule, with the collection's mark."""
    obj = render.prometheus_rule(settings, params["name"], params["namespace"], params["labels"] or {})
    return owned.marked(obj)


def file_text(document: Mapping[str, Any]) -> str:
    import yaml  # pylint: disable=import-outside-toplevel

    return HEADER_TEXT + yaml.safe_dump(dict(document), sort_keys=False, width=1000)


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def ours(text: str) -> bool:
    return text.startswith(HEADER + "\n")


def not_ours(path: str) -> CheckFailed:
    return CheckFailed(
        f"{path}: exists and was not written by gpu_alert_rules (its first line is not {HEADER!r}); nothing "
        "was written (remove or rename it, or choose another dest)",
        result={"changes": [], "not_ours": [path]},
    )


def file_present(path: str, text: str, check_mode: bool) -> WriteRun:
    before = read_text(path)
    if before is not None and not ours(before):
        raise not_ours(path)
    if before == text:
        return WriteRun({"changes": []}, False)
    if not check_mode:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return WriteRun({"changes": [path]}, True, [diff_entry(path, before or "", text)])


def file_absent(path: str, check_mode: bool) -> WriteRun:
    before = read_text(path)
    if before is None:
        return WriteRun({"changes": [], "left_alone": []}, False)
    if not ours(before):
        warning = f"{path} was not written by gpu_alert_rules: left as it is"
        return WriteRun({"changes": [], "left_alone": [path]}, False, warnings=[warning])
    if not check_mode:
        os.remove(path)
    return WriteRun({"changes": [path], "left_alone": []}, True, [diff_entry(path, before, "")])


def with_base(done: WriteRun, base: Mapping[str, Any]) -> WriteRun:
    return WriteRun({**base, **done.result}, done.changed, done.diff, done.warnings, done.failure)


def base_of(groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {"alerts": render.alert_names(groups), "groups": groups}


def to_file(module: AnsibleModule) -> WriteRun | None:
    """With dest, the rules written to (or removed from) that file, without a client; else None."""
    params = module.params
    path = params["dest"]
    if not path:
        return None
    settings = settings_of(params)
    if params["format"] == PROMETHEUS_RULE:
        document = rule_object(params, settings)
        groups = document["spec"]["groups"]
    else:
        document = render.rules_file(settings)
        groups = document["groups"]
    if params["state"] == "absent":
        done = file_absent(path, module.check_mode)
    else:
        done = file_present(path, file_text(document), module.check_mode)
    return with_base(done, {**base_of(groups), "dest": path})


def served(client: KubeClient) -> bool:
    """Whether the cluster serves PrometheusRules (the Prometheus Operator's CRDs are installed)."""
    try:
        # The group version's discovery document, not a resource: no api_path.
        resources = client.get(f"/apis/{API_VERSION}").get("resources") or []
    except ClusterError as exc:
        if exc.status != 404:
            raise ClusterError(f"cannot read the {API_VERSION} API: {exc.message}", exc.status) from None
        return False
    return any(r.get("name") == RESOURCE for r in resources)


def run(module: AnsibleModule, client: KubeClient) -> WriteRun:
    """The PrometheusRule applied where it changes, or removed where it is ours."""
    params = module.params
    obj = rule_object(params, settings_of(params))
    base = {**base_of(obj["spec"]["groups"]), "object": owned.object_key(obj)}
    if params["state"] == "absent":
        if not served(client):
            return with_base(WriteRun({"changes": [], "left_alone": []}, False), base)
        return with_base(owned.remove(client, OWNER, [obj], module.check_mode), base)
    if not served(client):
        raise ClusterError(
            f"the cluster does not serve {RESOURCE} in {API_VERSION}: install the Prometheus Operator (or its "
            "CRDs), or write a rules file with dest"
        )
    plans = owned.plan(client, OWNER, [obj])
    owned.write(client, OWNER, plans, module.check_mode)
    changes = owned.changed(plans)
    result = {"changes": [p.key for p in changes]}
    return with_base(WriteRun(result, bool(changes), [p.diff() for p in changes]), base)
