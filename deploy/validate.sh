#!/usr/bin/env bash
# Validates every manifest under deploy/kubernetes offline, against the Kubernetes JSON schemas
# that the PyPI package kubernetes-validate carries with it (strict: an unknown field is an
# error). A kind without a bundled schema (SandboxTemplate, a custom resource of agent-sandbox)
# is validated by its parts: its pod template as a Pod, its network policy as a NetworkPolicy
# with the pod selector the controller adds, and its own top-level fields against agent-sandbox's
# list. Also checks that the seccomp profile is JSON of the expected shape.
#
#   deploy/validate.sh                       (kubernetes-validate's Python on PATH as python3)
#   PYTHON=/path/to/venv/bin/python deploy/validate.sh
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
# The Kubernetes version the manifests are written for: user namespaces for pods (hostUsers),
# procMount and appArmorProfile are in its API.
version=${KUBERNETES_VERSION:-1.33.0}
"$python" - "$version" kubernetes/*.yaml <<'PY'
import json
import sys

import kubernetes_validate
import yaml

version, files = sys.argv[1], sys.argv[2:]
# SandboxTemplateSpec's fields (extensions.agents.x-k8s.io).
TEMPLATE_FIELDS = {"podTemplate", "volumeClaimTemplates", "networkPolicy",
                   "networkPolicyManagement", "envVarsInjectionPolicy", "service"}
failures = 0
checked = 0


def check(resource, where):
    global failures, checked
    name = f"{where}: {resource['kind']}/{resource['metadata']['name']}"
    try:
        kubernetes_validate.validate(resource, version, strict=True)
        print(f"ok   {name}")
        checked += 1
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        print(f"FAIL {name}: {path}: {e.message}")
        failures += 1


for file in files:
    with open(file) as f:
        for resource in yaml.safe_load_all(f):
            if resource is None:
                continue
            if resource["kind"] != "SandboxTemplate":
                check(resource, file)
                continue
            spec = resource["spec"]
            unknown = set(spec) - TEMPLATE_FIELDS
            if resource["apiVersion"] != "extensions.agents.x-k8s.io/v1alpha1" or unknown:
                print(f"FAIL {file}: SandboxTemplate: apiVersion or unknown fields {unknown}")
                failures += 1
            name = resource["metadata"]["name"]
            pod = spec["podTemplate"]
            check({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, **pod.get("metadata", {})},
                   "spec": pod["spec"]}, file + " (podTemplate)")
            if "networkPolicy" in spec:
                policy = dict(spec["networkPolicy"], podSelector={})
                check({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                       "metadata": {"name": name}, "spec": policy},
                      file + " (networkPolicy)")

with open("seccomp/capfs-executor.json") as f:
    profile = json.load(f)
assert profile["defaultAction"] in ("SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO"), profile["defaultAction"]
assert all(rule["names"] and rule["action"].startswith("SCMP_ACT_") for rule in profile["syscalls"])
print("ok   seccomp/capfs-executor.json")
print(f"{checked} passed, {failures} failed")
sys.exit(1 if failures else 0)
PY
