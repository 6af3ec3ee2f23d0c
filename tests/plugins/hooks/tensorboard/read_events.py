#!/usr/bin/python3
"""An independent reader of the tensorboard hook's event files.

Compiles the hook's .proto files with protoc --python_out into a temporary
directory (Debian's python3-protobuf runs them), reads every TFRecord of each
event file, checks both masked CRC-32Cs (computed here, bit by bit, not with
the hook's table), parses every record as tensorboard.Event and checks the
first is file_version "brain.Event:2".

  read_events.py PROTO_ROOT EVENT_FILE_OR_DIR --dump
      prints every scalar as JSON lines {"tag", "step", "wall_time", "value"}
  read_events.py PROTO_ROOT LOG_DIR --compare METRICS_JSONL
      asserts the scalars equal metrics.jsonl's (float32-rounded), same steps,
      same order, wall times increasing and within the run's time

Exit status 0 when everything checks, 1 with a message naming the file and
record otherwise.
"""
import argparse
import glob
import importlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time


def fail(message):
    print("read_events: " + message, file=sys.stderr)
    sys.exit(1)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def load_event_class(proto_root, out_dir):
    protos = ["tensorboard/compat/proto/summary.proto", "tensorboard/compat/proto/event.proto"]
    subprocess.run(["protoc", "-I", proto_root, "--python_out=" + out_dir] + protos, check=True)
    sys.path.insert(0, out_dir)
    return importlib.import_module("tensorboard.compat.proto.event_pb2").Event


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    pos, index = 0, 0
    while pos < len(data):
        where = "%s: record %d at byte %d" % (path, index, pos)
        if len(data) - pos < 12:
            fail(where + ": truncated header")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if length_crc != masked(crc32c(header)):
            fail(where + ": bad length CRC")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or len(data) < pos + 16 + length:
            fail(where + ": truncated data")
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if body_crc != masked(crc32c(body)):
            fail(where + ": bad data CRC")
        yield where, body
        pos += 16 + length
        index += 1


def read_scalars(event_class, path):
    scalars = []
    records = 0
    for index, (where, body) in enumerate(read_records(path)):
        records += 1
        event = event_class()
        event.ParseFromString(body)
        if index == 0:
            if event.WhichOneof("what") != "file_version" or event.file_version != "brain.Event:2":
                fail(where + ": the first event is not file_version brain.Event:2")
            continue
        if event.WhichOneof("what") != "summary":
            fail(where + ": not a summary event")
        for value in event.summary.value:
            if value.WhichOneof("value") != "simple_value":
                fail(where + ": tag %s has no simple_value" % value.tag)
            scalars.append({"tag": value.tag, "step": event.step, "wall_time": event.wall_time,
                            "value": value.simple_value})
    if records == 0:
        fail(path + ": empty event file")
    return scalars


def event_files(path):
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, "events.out.tfevents.*")))
    if not files:
        fail(path + ": no events.out.tfevents.* file")
    return files


def float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_from_metrics(metrics_path):
    expected = []
    with open(metrics_path) as f:
        for n, line in enumerate(f, 1):
            row = json.loads(line)
            prefix = {"train": "", "val": "val/", "test": "test/"}[row["mode"]]
            for key, value in row.items():
                if key in ("mode", "epoch", "iter"):
                    continue
                expected.append({"tag": prefix + key, "step": row["iter"], "value": value,
                                 "where": "%s:%d" % (metrics_path, n)})
    return expected


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("proto_root")
    parser.add_argument("events")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dump", action="store_true")
    mode.add_argument("--compare", metavar="METRICS_JSONL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        event_class = load_event_class(args.proto_root, out_dir)
        files = event_files(args.events)
        scalars = [s for path in files for s in read_scalars(event_class, path)]
    if args.dump:
        for s in scalars:
            print(json.dumps(s))
        return
    if len(files) != 1:
        fail("%s: %d event files, expected 1" % (args.events, len(files)))
    expected = expected_from_metrics(args.compare)
    if len(scalars) != len(expected):
        fail("%d scalars in %s, %d in %s" % (len(scalars), files[0], len(expected), args.compare))
    last_wall = 0.0
    for got, want in zip(scalars, expected):
        what = "%s (%s): tag %s step %d" % (files[0], want["where"], want["tag"], want["step"])
        if got["tag"] != want["tag"] or got["step"] != want["step"]:
            fail(what + ": the event file has tag %s step %d" % (got["tag"], got["step"]))
        if want["value"] is None:  # NaN or infinity in metrics.jsonl
            if math.isfinite(got["value"]):
                fail(what + ": expected a non-finite value, got %r" % got["value"])
        elif got["value"] != float32(want["value"]):
            fail(what + ": value %r, metrics.jsonl %r" % (got["value"], want["value"]))
        if got["wall_time"] < last_wall or got["wall_time"] > time.time():
            fail(what + ": wall_time %r out of order or in the future" % got["wall_time"])
        last_wall = got["wall_time"]
    print("read_events: %d scalars in %s match %s, every CRC checks"
          % (len(scalars), files[0], args.compare))


if __name__ == "__main__":
    main()
