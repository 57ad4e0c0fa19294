# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one registry of finding kinds: the kinds of every check, from ``findings/kinds/``.

A new check adds its module there and its group here; a new kind is one entry in its check's module.
"""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import (
    device_plugin,
    driver,
    fleet,
    health,
    placement,
    plugin_config,
    plugin_deploy,
    quarantine,
    release,
    validator,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import KindRegistry

KINDS = KindRegistry(
    validator.KINDS,
    device_plugin.KINDS,
    fleet.KINDS,
    driver.KINDS,
    health.KINDS,
    placement.KINDS,
    plugin_config.KINDS,
    plugin_deploy.KINDS,
    quarantine.KINDS,
    release.KINDS,
)
