# A rule's request is its family's (resources.gpu_jobs / train_jobs / java_jobs, or the executor profile's
# default-resources) with resources.rules[<rule>] over it: the paper profile's are measured (benchmarks/scale.py,
# docs/scale.md). A --set-resources on the command line still wins. Included after every rule file.
import sys

_MEASURED = config["resources"].get("rules", {})
for _unknown in sorted(set(_MEASURED) - {r.name for r in workflow.rules}):
    sys.exit(f"error: params: resources.rules.{_unknown}: no rule of that name")
for _rule in workflow.rules:
    _given = workflow.resource_settings.overwrite_resources.get(_rule.name) or {}
    _rule.resources.update({k: v for k, v in _MEASURED.get(_rule.name, {}).items() if k not in _given})
