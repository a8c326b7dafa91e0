from runner.platforms.kubernetes.nodes import NFD_PREFIX, cpu_model, isolation


def test_cpu_model_comes_from_node_feature_discovery_labels_or_is_unknown():
    labels = {NFD_PREFIX + "vendor_id": "AMD", NFD_PREFIX + "family": "25", NFD_PREFIX + "id": "1"}
    assert cpu_model(labels) == "AMD family 25 model 1"
    assert cpu_model({"kubernetes.io/hostname": "n1"}) is None
    assert cpu_model(None) is None


def test_isolation_says_whether_envoy_can_be_pinned():
    assert isolation({"a": "static", "b": "static"})["cpu_manager_policy"] == "static"
    assert "exclusive CPUs at whole-core limits" in isolation({"a": "static"})["note"]
    assert "not pinned" in isolation({"a": "none"})["note"]
    mixed = isolation({"b": "none", "a": "static"})
    assert mixed["cpu_manager_policy"] == "a: static, b: none" and "depends on the node" in mixed["note"]
