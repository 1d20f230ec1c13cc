#!/usr/bin/env python3
"""A minimal OTLP trace receiver for the real-vLLM proof: gRPC and HTTP/protobuf.

Decodes every export with the official protos (PyPI opentelemetry-proto, which vLLM's
opentelemetry-exporter-otlp pulls in) and appends one JSON line per span to OUT:
service, name, kind, trace_id, span_id, parent_span_id, start/end (unix ns), attributes.

    otlp_receiver.py OUT.jsonl --grpc-port 4317 --http-port 4318
"""
import argparse
import json
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
lock = threading.Lock()


def value(v):
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def record(request, out, transport):
    lines = []
    for rs in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                lines.append(json.dumps({
                    "transport": transport,
                    "service": resource.get("service.name"),
                    "resource": resource,
                    "name": s.name,
                    "kind": KINDS.get(s.kind, str(s.kind)),
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "start_ns": s.start_time_unix_nano,
                    "end_ns": s.end_time_unix_nano,
                    "attributes": {kv.key: value(kv.value) for kv in s.attributes},
                    "events": [e.name for e in s.events],
                    "status": s.status.code,
                }))
    with lock, open(out, "a") as f:
        for line in lines:
            f.write(line + "\n")


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, out):
        self.out = out

    def Export(self, request, context):
        record(request, self.out, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


def http_handler(out):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            record(request, out, "http")
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--grpc-port", type=int, default=4317)
    ap.add_argument("--http-port", type=int, default=4318)
    args = ap.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(args.out), server)
    server.add_insecure_port(f"127.0.0.1:{args.grpc_port}")
    server.start()
    http = ThreadingHTTPServer(("127.0.0.1", args.http_port), http_handler(args.out))
    print(f"otlp receiver: grpc 127.0.0.1:{args.grpc_port}, http 127.0.0.1:{args.http_port}", flush=True)
    http.serve_forever()


if __name__ == "__main__":
    main()
