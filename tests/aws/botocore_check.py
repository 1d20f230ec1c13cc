"""Cross-checks the daemon's AWS wire work against botocore (the AWS SDK for Python).

Reads JSON on stdin: `sign`, requests the daemon signed (method, url, headers, body,
credentials, region, service, the X-Amz-Date it signed at); `streams`, base64 bodies the
simulator sent in the AWS event stream. Writes JSON: for each request the Authorization
botocore's SigV4Auth computes for the same inputs at the same instant; for each stream the
messages botocore's EventStreamBuffer decodes (headers, payload) or the error it raises.
"""

import base64
import datetime
import json
import sys

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer


def sign(case):
    at = datetime.datetime.strptime(case["amz_date"], "%Y%m%dT%H%M%SZ")
    botocore.auth.get_current_datetime = lambda *a, **k: at
    request = AWSRequest(
        method=case["method"],
        url=case["url"],
        headers=dict(case["headers"]),
        data=case["body"].encode(),
    )
    credentials = Credentials(case["access_key"], case["secret_key"], case.get("token"))
    botocore.auth.SigV4Auth(credentials, case["service"], case["region"]).add_auth(request)
    return {
        "authorization": request.headers["Authorization"],
        "amz_date": request.headers["X-Amz-Date"],
    }


def decode(body):
    buffer = EventStreamBuffer()
    buffer.add_data(base64.b64decode(body))
    messages = []
    try:
        for message in buffer:
            messages.append(
                {
                    "headers": {k: str(v) for k, v in message.headers.items()},
                    "payload": message.payload.decode(),
                }
            )
    except Exception as e:  # botocore's ChecksumMismatch and friends
        return {"messages": messages, "error": type(e).__name__}
    return {"messages": messages, "error": None}


def main():
    cases = json.load(sys.stdin)
    json.dump(
        {
            "sign": [sign(c) for c in cases["sign"]],
            "streams": [decode(s) for s in cases["streams"]],
        },
        sys.stdout,
    )


main()
