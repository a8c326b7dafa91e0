"""What the tests share, in one package: pytest puts tests/ on the path (`pythonpath` in pyproject.toml), so a
test says `from support.steps import make_step`; nothing edits sys.path.

- steps: the one Step factory
- simulated: the one simulated Envoy, a fake clock, fake Locust and Prometheus, and the fake platform
- rounds: a run with interleaved rounds simulated on the fake platform (the report tests')
- report_data: the recorded runs in tests/report/data
- processes: the CLI as a user runs it, its one-line errors, processes and cgroups left behind
- wait: wait for an event, with a deadline, failing with what was waited for
- examples: how many examples a property test draws
- project: the project's folders, and the modules outside tests/ a test loads (bench/, locustfiles/)
- scenarios: scenario files the local end-to-end tests write
- sweeps: a sweep in the background: started, waited on, stopped by a signal, checked to leave nothing
- lean_client, lean_driver: real servers for the lean client, and the gevent child that runs it
- chromium: headless Chromium over the DevTools protocol
- apiserver, k8s: a real kube-apiserver and etcd, and the objects and scenarios its tests build
- kubeconform: strict validation of the manifests the product writes, against the cluster's schemas
- cluster: the one-machine cluster (make targets, the CLI in the background, a run's live state) and k8s/'s scripts
- knees: a knee against the windows it came from; selection: whether a shared run's nightly test is selected
"""
