#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The kubelet's side of a pod sandbox's life, for the containerd test:
calls containerd's CRI service (runtime.v1) over its socket, as the kubelet
does. The protobuf module is generated from runtime.proto by protoc into
$CRI_PB_DIR before the test runs.

  cri.py SOCKET version
  cri.py SOCKET run NAME NAMESPACE UID LOGDIR   -> prints the sandbox id
  cri.py SOCKET status ID                       -> JSON: state, ip, netns, pid
  cri.py SOCKET stop ID
  cri.py SOCKET remove ID
Errors: the gRPC status on stderr, exit 1; bad usage exits 2."""
import json
import os
import sys

sys.path.insert(0, os.environ.get("CRI_PB_DIR", "."))
import grpc  # noqa: E402
import runtime_pb2 as pb  # noqa: E402

SERVICE = "/runtime.v1.RuntimeService/"


def call(channel, method, request, reply_type):
    rpc = channel.unary_unary(SERVICE + method,
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=reply_type.FromString)
    return rpc(request, timeout=120)


def netns_and_pid(info):
    """containerd's verbose status: info["info"] is a JSON document with the
    sandbox's runtime spec (its network namespace path) and its pid."""
    try:
        doc = json.loads(info.get("info", "{}"))
    except ValueError:
        return "", 0
    ns = ""
    for n in doc.get("runtimeSpec", {}).get("linux", {}).get("namespaces", []):
        if n.get("type") == "network":
            ns = n.get("path", "")
    return ns, doc.get("pid", 0)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    sock, cmd, args = argv[1], argv[2], argv[3:]
    channel = grpc.insecure_channel("unix://" + sock)
    if cmd == "version" and not args:
        r = call(channel, "Version", pb.VersionRequest(version="v1"), pb.VersionResponse)
        print(r.runtime_name, r.runtime_version, r.runtime_api_version)
    elif cmd == "run" and len(args) == 4:
        name, namespace, uid, logdir = args
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, namespace=namespace, uid=uid, attempt=0),
            hostname=name, log_directory=logdir, labels={"podinject-test": "1"})
        r = call(channel, "RunPodSandbox", pb.RunPodSandboxRequest(config=config),
                 pb.RunPodSandboxResponse)
        print(r.pod_sandbox_id)
    elif cmd == "status" and len(args) == 1:
        r = call(channel, "PodSandboxStatus",
                 pb.PodSandboxStatusRequest(pod_sandbox_id=args[0], verbose=True),
                 pb.PodSandboxStatusResponse)
        ns, pid = netns_and_pid(r.info)
        print(json.dumps({"state": "ready" if r.status.state == 0 else "notready",
                          "ip": r.status.network.ip, "netns": ns, "pid": pid,
                          "name": r.status.metadata.name,
                          "namespace": r.status.metadata.namespace}))
    elif cmd == "stop" and len(args) == 1:
        call(channel, "StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=args[0]),
             pb.StopPodSandboxResponse)
    elif cmd == "remove" and len(args) == 1:
        call(channel, "RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=args[0]),
             pb.RemovePodSandboxResponse)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except grpc.RpcError as e:
        print("cri.py: %s: %s" % (e.code().name, e.details()), file=sys.stderr)
        sys.exit(1)
