"""state_client.py — the HTTP client the session-state e2e scripts share
(server_state_budget.sh, server_state_dir.sh, server_state_models.sh,
server_prefill.sh): JSON requests as tenant alice with the session token in
X-Zerolayer-Session, each answer as (status, JSON body), errors included."""
import json
import urllib.error
import urllib.request


def requester(url, user='alice'):
    def req(path, body=None, token=None, method='POST'):
        h = {'content-type': 'application/json', 'X-Zerolayer-User': user}
        if token:
            h['X-Zerolayer-Session'] = token
        r = urllib.request.Request(url + path, json.dumps(body).encode() if body is not None else None, h,
                                   method=method)
        try:
            with urllib.request.urlopen(r, timeout=120) as f:
                return f.status, json.load(f)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)
    return req
