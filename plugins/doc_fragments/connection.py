# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options shared by every module that talks to the Kubernetes API."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a dictionary.
      - A path may list several files separated by C(:), as C(KUBECONFIG) does; the first file
        that defines a name wins.
      - When neither this, O(context), nor O(host) with credentials is given, the client uses the
        service account when running in a pod (E(KUBERNETES_SERVICE_HOST) is set), and otherwise,
        or when the pod has no service account token mounted, the file named by E(KUBECONFIG),
        or C(~/.kube/config).
      - A user that gets its credentials from an exec plugin (C(aws eks get-token),
        C(gke-gcloud-auth-plugin), C(kubelogin)) or an OIDC auth-provider must get them, or the
        task fails naming the plugin, its exit code and the end of its stderr (or the refresh that
        failed); no request is sent without them.
      - The string values of a dictionary's C(users) should be kept out of logs with C(no_log) or a vault.
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: raw
  context:
    description:
      - The name of a context in the kubeconfig. Defaults to the kubeconfig's C(current-context).
      - Can also be set with the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the API server, for example C(https://192.0.2.10:6443). Without a scheme, C(https://) is used.
      - With O(api_key), with O(username) and O(password), or with O(client_cert) and O(client_key), no kubeconfig
        is read.
      - With none of those, it overrides the server of the kubeconfig or in-cluster configuration.
      - Can also be set with the E(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Bearer token used to authenticate with the API server.
      - Can also be set with the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  username:
    description:
      - Username for HTTP basic authentication, on the few API servers that still allow it.
      - Can also be set with the E(K8S_AUTH_USERNAME) environment variable.
    type: str
  password:
    description:
      - Password for HTTP basic authentication, see O(username).
      - Can also be set with the E(K8S_AUTH_PASSWORD) environment variable.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. It is verified unless this is V(false)
        or the kubeconfig sets C(insecure-skip-tls-verify).
      - Can also be set with the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to the CA certificate (the full chain) that signed the API server's certificate.
      - Can also be set with the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate used to authenticate with the API server. Needs O(client_key).
      - Can also be set with the E(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the private key of O(client_cert).
      - Can also be set with the E(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [key_file]
  proxy:
    description:
      - URL of an HTTP (or SOCKS) proxy to reach the API server through.
      - Without it, the proxy named by the kubeconfig (C(proxy-url)) or by E(HTTPS_PROXY) is used.
      - Can also be set with the E(K8S_AUTH_PROXY) environment variable.
    type: str
  no_proxy:
    description:
      - Comma-separated hosts, domains, IP addresses or CIDRs to reach without the proxy,
        for example V(localhost,.local,127.0.0.1,10.0.0.0/8).
      - Can also be set with the E(K8S_AUTH_NO_PROXY) environment variable.
    type: str
  proxy_headers:
    description:
      - Headers sent to the proxy (O(proxy), or the kubeconfig's C(proxy-url)), built as
        C(urllib3.util.make_headers) builds them. With an C(https) API server they go in the
        C(CONNECT) request only, never to the API server.
    type: dict
    suboptions:
      user_agent:
        description:
          - The C(User-Agent) the proxy sees, for example V(platform-ci/1.0).
          - Can also be set with the E(K8S_AUTH_PROXY_HEADERS_USER_AGENT) environment variable.
        type: str
      basic_auth:
        description:
          - C(username:password) sent to the proxy as basic credentials in an C(Authorization) header.
          - Can also be set with the E(K8S_AUTH_PROXY_HEADERS_BASIC_AUTH) environment variable.
        type: str
      proxy_basic_auth:
        description:
          - C(username:password) sent to the proxy as basic credentials in a C(Proxy-Authorization) header.
          - Can also be set with the E(K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH) environment variable.
        type: str
  persist_config:
    description:
      - Whether to write a refreshed token back to the kubeconfig file, as C(kubectl) does. When an OIDC
        (or C(gcp)) auth-provider's token has expired, the client refreshes it; without this the new
        id-token and refresh token are used for this task only, and the refresh token in the file may
        stop working once the issuer rotates it.
      - Defaults to V(false). It has no effect with a kubeconfig given as a dictionary, with exec plugins
        (they keep their own cache) or in a pod.
      - Can also be set with the E(K8S_AUTH_PERSIST_CONFIG) environment variable.
    type: bool
  impersonate_user:
    description:
      - Username to act as (the C(Impersonate-User) header). The authenticated identity needs the
        C(impersonate) verb on C(users).
      - Can also be set with the E(K8S_AUTH_IMPERSONATE_USER) environment variable.
    type: str
  impersonate_groups:
    description:
      - Groups to act as (one C(Impersonate-Group) header each). Needs the C(impersonate) verb on C(groups).
      - Can also be set with the E(K8S_AUTH_IMPERSONATE_GROUPS) environment variable, comma-separated.
    type: list
    elements: str
notes:
  - The options and environment variables are those of C(kubernetes.core), so one setting serves both
    collections. The environment variables E(K8S_AUTH_VALIDATE_CERTS), E(K8S_AUTH_CA_CERT),
    E(K8S_AUTH_CLIENT_CERT) and E(K8S_AUTH_CLIENT_KEY) are read too.
  - Requests are retried on 429, 500, 502, 503 and 504 responses and on connection failures, with
    exponential backoff that honours C(Retry-After). Creates are retried only when the API server did not act
    on them (429, 503, or no connection made).
  - Tokens, passwords and kubeconfig contents never appear in results or messages.
requirements:
  - kubernetes >= 30.1.0 (the Python client)
  - PyYAML
"""
