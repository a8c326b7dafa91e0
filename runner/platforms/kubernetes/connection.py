"""Reaching a cluster: kubeconfig or in-cluster credentials, API clients, and the API server's proxy.

Every API call has a client-side timeout, and a transient failure (the API server unreachable, timing out,
or answering 429, 500, 502, 503 or 504) is retried with backoff inside runner.http's budget, so a run
rides out an API server that is restarted or paused for half a minute.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import requests
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from runner.errors import PlatformError, UnreachableError, UsageError
from runner.http import BACKOFF_S, MAX_BACKOFF_S, RETRY_BUDGET_S, RetryingClient

REQUEST_TIMEOUT_S = 10.0
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
CLUSTER_HINT = "check KUBECONFIG (or kubernetes.kubeconfig in the scenario) and `kubectl cluster-info`"
T = TypeVar("T")


class NotFoundError(PlatformError):
    """The API server answered 404."""


class ConflictError(PlatformError):
    """The API server answered 409: the object already exists, or changed since it was read."""


class ApiBusyError(PlatformError):
    """The API server answered 429 or 5xx: worth trying again."""


@dataclass
class Cluster:
    """API clients for one cluster, and a requests session that carries the same credentials."""

    api: client.ApiClient
    core: client.CoreV1Api
    apps: client.AppsV1Api
    host: str

    @property
    def custom(self) -> client.CustomObjectsApi:
        """The API of custom resources (Contour's HTTPProxy)."""
        return client.CustomObjectsApi(self.api)

    def client(self, budget_s: float = RETRY_BUDGET_S) -> RetryingClient:
        """An HTTP client authenticated like the API client (for service-proxy URLs), retrying transient
        failures for up to `budget_s` and renewing an expired bearer token on a 401."""
        return RetryingClient(self.session(), budget_s=budget_s, refresh=self._authorize)

    def _authorize(self, session: requests.Session) -> None:
        cfg = self.api.configuration
        # kubernetes >= 34 keeps a token under "BearerToken" (older clients: "authorization"); the hook
        # that renews an expiring one runs inside get_api_key_with_prefix
        token = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            session.headers["Authorization"] = token

    def session(self) -> requests.Session:
        """An HTTP session authenticated like the API client (for service-proxy URLs)."""
        cfg = self.api.configuration
        session = requests.Session()
        # REQUESTS_CA_BUNDLE and the like would replace the cluster's CA: take settings from the kubeconfig only.
        session.trust_env = False
        if cfg.proxy:
            session.proxies = {"http": cfg.proxy, "https": cfg.proxy}
        session.verify = (cfg.ssl_ca_cert or True) if cfg.verify_ssl else False
        if cfg.cert_file and cfg.key_file:
            session.cert = (cfg.cert_file, cfg.key_file)
        self._authorize(session)
        return session

    def served_versions(self, group: str) -> list[str]:
        """The versions the API server serves of an API group (discovery, which every account may read); empty
        when no CRD or API of that group is installed."""
        groups = call("discover the API groups", client.ApisApi(self.api).get_api_versions)
        found = next((g for g in groups.groups or [] if g.name == group), None)
        return [str(v.version) for v in found.versions or []] if found is not None else []

    def service_proxy_url(self, namespace: str, service: str, port: int | str) -> str:
        """The API server's proxy to a Service port: no Ingress or port-forward needed."""
        return f"{self.host}/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy"


def connect(kubeconfig: str | None = None, context: str | None = None) -> Cluster:
    """Load credentials (in-cluster when running in a pod without a kubeconfig) and check the API answers."""
    cfg = client.Configuration()
    try:
        if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and not os.environ.get("KUBECONFIG"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    except (ConfigException, FileNotFoundError, TypeError) as error:
        raise UsageError(f"no usable Kubernetes credentials ({str(error).splitlines()[0]})", CLUSTER_HINT) from None
    cfg.retries = 1
    api = client.ApiClient(cfg)
    cluster = Cluster(api, client.CoreV1Api(api), client.AppsV1Api(api), cfg.host.rstrip("/"))
    with translate_errors("reach the Kubernetes API"):
        client.VersionApi(api).get_code(_request_timeout=REQUEST_TIMEOUT_S)
    return cluster


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Turn client and network exceptions into one-line typed errors."""
    try:
        yield
    except ApiException as error:
        reason = _api_reason(error)
        if error.status == 403:
            raise UsageError(
                f"forbidden to {action}: {reason}", "grant the RBAC in k8s/manifests/rbac to the account used"
            ) from None
        if error.status == 404:
            raise NotFoundError(f"cannot {action}: not found ({reason})") from None
        if error.status == 401:
            raise UsageError(f"unauthorized to {action}: {reason}", CLUSTER_HINT) from None
        if error.status == 409:
            raise ConflictError(f"cannot {action}: conflict ({reason})") from None
        if error.status in RETRY_STATUSES:
            raise ApiBusyError(f"cannot {action}: HTTP {error.status} {reason}") from None
        raise PlatformError(f"cannot {action}: HTTP {error.status} {reason}") from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise UnreachableError(
            f"Kubernetes API unreachable while trying to {action} ({type(error).__name__})", CLUSTER_HINT
        ) from None


def call(action: str, function: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call a client method with a timeout, translating its errors; transient failures are retried with
    backoff until RETRY_BUDGET_S has passed, then the last one is raised. A create retried after a lost
    answer may find its object there: ConflictError, for the caller to judge."""
    deadline = time.monotonic() + RETRY_BUDGET_S
    delay = BACKOFF_S
    while True:
        try:
            with translate_errors(action):
                return function(*args, _request_timeout=REQUEST_TIMEOUT_S, **kwargs)
        except (UnreachableError, ApiBusyError):
            if time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)


def exists(function: Callable[..., object], *args: object) -> bool:
    """True when a read succeeds, False on 404; other errors are translated."""
    try:
        call("read an object", function, *args)
    except NotFoundError:
        return False
    return True


def _api_reason(error: ApiException) -> str:
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except ValueError:
        return str(error.reason)
