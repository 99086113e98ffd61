"""ctrial's HParams-plugin summaries (src/formats/tb_hparams.c) read back by
the `tensorboard` package and compared with what torch writes.

hp_write writes a search (the experiment at the logdir's top, two trials in
trials/1 and trials/2 with their scalars) and, in another directory, an
experiment and a session that torch.utils.tensorboard.summary.hparams() can
express. This script checks:

1. every record through the CRC-checking reader; each hparams Event field by
   field (wall time, step, tag, no value of its own, plugin name) and its
   content, a plugin_data_pb2.HParamsPluginData, against the message built
   here with api_pb2: parsed equality, and the bytes against Python's
   deterministic serialization (map entries sorted by key);
2. TensorBoard's loading path: EventFileLoader and the plugin event
   multiplexer's PluginRunToTagToContent("hparams"), run by run;
3. the HParams dashboard's own backend (get_experiment and
   list_session_groups handlers over a MultiplexerDataProvider): the
   experiment's columns, both sessions with their hyperparameters, status,
   times and last validation accuracy;
4. torch's hparams() for the same inputs: the same Value (tag, metadata,
   content bytes) once the times torch does not write are set to ours;
   TensorBoard's summary_v2 (hparams_config_pb, hparams_pb) for what torch
   cannot say (intervals, bools, group names).

Usage: test_hp_read.py HP_WRITE_PROGRAM"""
import os
import subprocess
import sys
import tempfile

from tensorboard import context as tb_context
from tensorboard.backend.event_processing import data_provider as tb_data_provider
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub import errors as stub_errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as stub
from tensorboard.plugins import base_plugin
from tensorboard.plugins.hparams import api_pb2, backend_context, get_experiment
from tensorboard.plugins.hparams import list_session_groups, metadata, plugin_data_pb2
from tensorboard.plugins.hparams import summary_v2 as hp_v2
from google.protobuf import struct_pb2

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


# ---- what hp_write.c writes ----------------------------------------------------

METRICS = ["validation/validation_accuracy", "training/loss"]
FLOAT64, STRING, BOOL = api_pb2.DATA_TYPE_FLOAT64, api_pb2.DATA_TYPE_STRING, api_pb2.DATA_TYPE_BOOL


def listv(*values):
    out = struct_pb2.ListValue()
    for v in values:
        if isinstance(v, bool):
            out.values.add(bool_value=v)
        elif isinstance(v, str):
            out.values.add(string_value=v)
        else:
            out.values.add(number_value=v)
    return out


def metric_infos():
    return [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t)) for t in METRICS]


def search_experiment():
    return api_pb2.Experiment(
        time_created_secs=1700000000.5,
        hparam_infos=[
            api_pb2.HParamInfo(name="lr", type=FLOAT64, domain_discrete=listv(0.001, 0.01, 0.1)),
            api_pb2.HParamInfo(name="optimizer", type=STRING, domain_discrete=listv("adam", "sgd")),
            api_pb2.HParamInfo(name="dropout", type=FLOAT64,
                               domain_interval=api_pb2.Interval(min_value=0.0, max_value=0.5)),
            api_pb2.HParamInfo(name="use_bn", type=BOOL, domain_discrete=listv(False, True)),
            api_pb2.HParamInfo(name="layers", type=FLOAT64),
            api_pb2.HParamInfo(name="note", type=STRING),
        ],
        metric_infos=metric_infos())


HP1 = {"use_bn": True, "lr": 0.1, "optimizer": "sgd", "dropout": 0.25, "note": "größe €",
       "layers": 3}
HP2 = {"optimizer": "adam", "note": "", "lr": 0.01, "dropout": 0.0, "use_bn": False, "layers": -1}
TORCH_HP = {"lr": 0.1, "optimizer": "sgd", "layers": 3, "note": "größe €"}
TORCH_DOMAINS = {"lr": [0.1, 0.01, 0.001], "optimizer": ["sgd", "adam"]}


def start_info(hparams, group, start):
    out = plugin_data_pb2.SessionStartInfo(group_name=group, start_time_secs=start)
    for k, v in hparams.items():
        if isinstance(v, bool):
            out.hparams[k].bool_value = v
        elif isinstance(v, str):
            out.hparams[k].string_value = v
        else:
            out.hparams[k].number_value = v
    return out


def end_info(status, end):
    return plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=end)


def plugin_data(which, msg):
    return plugin_data_pb2.HParamsPluginData(version=0, **{which: msg})


def torch_like_experiment():
    return api_pb2.Experiment(
        time_created_secs=1700000300.0,
        hparam_infos=[
            api_pb2.HParamInfo(name="lr", type=FLOAT64, domain_discrete=listv(0.1, 0.01, 0.001)),
            api_pb2.HParamInfo(name="optimizer", type=STRING, domain_discrete=listv("sgd", "adam")),
            api_pb2.HParamInfo(name="layers", type=FLOAT64),
            api_pb2.HParamInfo(name="note", type=STRING),
        ],
        metric_infos=metric_infos())


# (directory relative to the workdir, [(wall_time, tag, HParamsPluginData)]):
# the hparams records of each directory, in file order.
def expected_runs():
    return {
        "logs": [(1700000000.5, metadata.EXPERIMENT_TAG,
                  plugin_data("experiment", search_experiment()))],
        "logs/trials/1": [
            (1700000001.0, metadata.SESSION_START_INFO_TAG,
             plugin_data("session_start_info", start_info(HP1, "", 1700000001.0))),
            (1700000100.25, metadata.SESSION_END_INFO_TAG,
             plugin_data("session_end_info", end_info(api_pb2.STATUS_SUCCESS, 1700000100.25))),
        ],
        "logs/trials/2": [
            (1700000002.0, metadata.SESSION_START_INFO_TAG,
             plugin_data("session_start_info", start_info(HP2, "trial-2", 1700000002.0))),
            (1700000200.75, metadata.SESSION_END_INFO_TAG,
             plugin_data("session_end_info", end_info(api_pb2.STATUS_FAILURE, 1700000200.75))),
        ],
        "torch": [
            (1700000300.0, metadata.EXPERIMENT_TAG,
             plugin_data("experiment", torch_like_experiment())),
            (1700000301.0, metadata.SESSION_START_INFO_TAG,
             plugin_data("session_start_info", start_info(TORCH_HP, "", 1700000301.0))),
            (1700000302.0, metadata.SESSION_END_INFO_TAG,
             plugin_data("session_end_info", end_info(api_pb2.STATUS_SUCCESS, 1700000302.0))),
        ],
    }


# The scalars of each trial: (tag, step, value, wall_time).
def trial_scalars(acc0, base):
    out = []
    for i in (1, 2, 3):
        out.append(("training/loss", 100 * i, 2.0 / i, base + i))
        out.append(("validation/validation_accuracy", 100 * i, acc0 + 0.125 * i, base + i + 0.5))
    return out


# ---- 1. the records --------------------------------------------------------------

def raw_records(path):
    reader = stub.PyRecordReader_New(path.encode(), 0, None, None)
    out = []
    while True:
        try:
            reader.GetNext()
        except stub_errors.OutOfRangeError:
            return out
        out.append(reader.record())


def hparams_value(wall_time, tag, content):
    """The Value and Event torch writes around a content (step 0, no data)."""
    value = summary_pb2.Summary.Value(
        tag=tag, metadata=summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="hparams",
                                                               content=content)))
    event = event_pb2.Event(wall_time=wall_time, summary=summary_pb2.Summary(value=[value]))
    return value, event


def check_records(workdir, want_runs):
    """Every file's records; returns {dir: [content bytes of hparams records]}."""
    got_contents = {}
    for d, want in want_runs.items():
        files = sorted(os.listdir(os.path.join(workdir, d)))
        files = [f for f in files if f.startswith("events.out.tfevents.")]
        hp_records = []
        for f in files:
            try:
                records = raw_records(os.path.join(workdir, d, f))
            except stub_errors.DataLossError as e:
                check(False, f"{d}/{f}: record reader: {e}")
                continue
            check(event_pb2.Event.FromString(records[0]).file_version == "brain.Event:2",
                  f"{d}/{f}: file_version first")
            for rec in records[1:]:
                ev = event_pb2.Event.FromString(rec)
                if ev.HasField("summary") and ev.summary.value[0].tag.startswith("_hparams_/"):
                    hp_records.append((rec, ev))
        # Trial 2 has two files: its hparams records are all in the .hparams one.
        check(len(hp_records) == len(want),
              f"{d}: {len(hp_records)} hparams records, expected {len(want)}")
        contents = []
        for (rec, ev), (wall, tag, msg) in zip(hp_records, want):
            check(ev.wall_time == wall, f"{d} {tag}: wall_time {ev.wall_time} vs {wall}")
            check(ev.step == 0, f"{d} {tag}: step {ev.step}")
            check(len(ev.summary.value) == 1, f"{d} {tag}: one value")
            v = ev.summary.value[0]
            check(v.tag == tag, f"{d}: tag {v.tag!r} vs {tag!r}")
            check(v.WhichOneof("value") is None, f"{d} {tag}: no value of its own, like torch's")
            check(v.metadata.plugin_data.plugin_name == "hparams", f"{d} {tag}: plugin name")
            check(v.metadata.data_class == 0 and not v.metadata.display_name
                  and not v.metadata.summary_description,
                  f"{d} {tag}: metadata holds only plugin_data")
            content = v.metadata.plugin_data.content
            parsed = plugin_data_pb2.HParamsPluginData.FromString(content)
            check(parsed == msg, f"{d} {tag}: content\n{parsed}\nexpected\n{msg}")
            want_bytes = msg.SerializeToString(deterministic=True)
            check(content == want_bytes,
                  f"{d} {tag}: content bytes\n{content.hex()}\nvs\n{want_bytes.hex()}")
            _, want_event = hparams_value(wall, tag, want_bytes)
            check(rec == want_event.SerializeToString(), f"{d} {tag}: event bytes")
            contents.append(content)
        got_contents[d] = contents
    return got_contents


# ---- 2. TensorBoard's loading ------------------------------------------------------

def check_loading(workdir):
    logdir = os.path.join(workdir, "logs")
    # EventFileLoader migrates hparams values (a NULL tensor, DATA_CLASS_TENSOR).
    path = [f for f in os.listdir(logdir) if f.startswith("events.out")][0]
    events = list(event_file_loader.EventFileLoader(os.path.join(logdir, path)).Load())
    check(len(events) == 2, f"loader read {len(events)} events")
    if len(events) == 2:
        v = events[1].summary.value[0]
        check(v.tag == metadata.EXPERIMENT_TAG and v.HasField("tensor")
              and v.metadata.data_class == summary_pb2.DATA_CLASS_TENSOR,
              "loader: the experiment migrated to a tensor time series")
        check(metadata.parse_experiment_plugin_data(v.metadata.plugin_data.content)
              == search_experiment(), "loader: the experiment parses")

    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    content = mux.PluginRunToTagToContent(metadata.PLUGIN_NAME)
    check(sorted(content) == [".", "trials/1", "trials/2"], f"hparams runs {sorted(content)}")
    check(sorted(content.get(".", {})) == [metadata.EXPERIMENT_TAG], "run . holds the experiment")
    for run in ("trials/1", "trials/2"):
        check(sorted(content.get(run, {})) == [metadata.SESSION_END_INFO_TAG,
                                               metadata.SESSION_START_INFO_TAG],
              f"run {run} holds a session start and end: {sorted(content.get(run, {}))}")
    if "trials/2" in content:
        start = metadata.parse_session_start_info_plugin_data(
            content["trials/2"][metadata.SESSION_START_INFO_TAG])
        check(start == start_info(HP2, "trial-2", 1700000002.0), "multiplexer: trial 2's start")
        end = metadata.parse_session_end_info_plugin_data(
            content["trials/2"][metadata.SESSION_END_INFO_TAG])
        check(end.status == api_pb2.STATUS_FAILURE, "multiplexer: trial 2 failed")
    # The scalars beside them, for the dashboard's metric columns.
    for run, acc0, base in (("trials/1", 0.5, 1700000010.0), ("trials/2", 0.25, 1700000020.0)):
        acc = mux.GetAccumulator(run)
        for tag, step, value, wall in trial_scalars(acc0, base):
            got = [t for t in acc.Tensors(tag) if t.step == step]
            check(len(got) == 1 and got[0].wall_time == wall, f"{run} {tag}@{step} scalar")
    return mux, logdir


# ---- 3. the HParams dashboard's backend ------------------------------------------

def check_dashboard(mux, logdir):
    provider = tb_data_provider.MultiplexerDataProvider(mux, logdir)
    ctx = backend_context.Context(base_plugin.TBContext(
        logdir=logdir, data_provider=provider, multiplexer=mux))
    req_ctx = tb_context.RequestContext()

    exp = get_experiment.Handler(req_ctx, ctx, "", api_pb2.GetExperimentRequest()).run()
    want = search_experiment()  # the dashboard lists the hyperparameters by name
    infos = sorted(want.hparam_infos, key=lambda h: h.name)
    want.ClearField("hparam_infos")
    want.hparam_infos.extend(infos)
    check(exp == want, f"dashboard experiment\n{exp}\nexpected\n{want}")

    request = api_pb2.ListSessionGroupsRequest(
        start_index=0, slice_size=100,
        allowed_statuses=[api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS,
                          api_pb2.STATUS_FAILURE, api_pb2.STATUS_RUNNING],
        aggregation_type=api_pb2.AGGREGATION_AVG)
    resp = list_session_groups.Handler(req_ctx, ctx, "", request).run()
    groups = {g.name: g for g in resp.session_groups}
    # Trial 1 has no group name: its run's name is its group's.
    check(sorted(groups) == ["trial-2", "trials/1"], f"session groups {sorted(groups)}")
    check(resp.total_size == 2, f"total_size {resp.total_size}")
    cases = [("trials/1", "trials/1", HP1, api_pb2.STATUS_SUCCESS, 1700000001.0, 1700000100.25,
              0.875, 2.0 / 3),
             ("trial-2", "trials/2", HP2, api_pb2.STATUS_FAILURE, 1700000002.0, 1700000200.75,
              0.625, 2.0 / 3)]
    for group, run, hp, status, start, end, acc, loss in cases:
        g = groups.get(group)
        if g is None:
            continue
        check(dict(g.hparams) == dict(start_info(hp, "", 0).hparams),
              f"{group}: hparams {g.hparams}")
        check(len(g.sessions) == 1, f"{group}: one session")
        s = g.sessions[0]
        check(s.name == run, f"{group}: session {s.name}")
        check(s.status == status and s.start_time_secs == start and s.end_time_secs == end,
              f"{group}: status {s.status}, times {s.start_time_secs} {s.end_time_secs}")
        metrics = {m.name.tag: m for m in s.metric_values}
        check(sorted(metrics) == sorted(METRICS), f"{group}: metrics {sorted(metrics)}")
        m = metrics.get("validation/validation_accuracy")
        check(m is not None and abs(m.value - acc) < 1e-6 and m.training_step == 300,
              f"{group}: last validation accuracy {m}")
        m = metrics.get("training/loss")
        check(m is not None and abs(m.value - loss) < 1e-6, f"{group}: last loss {m}")
        gm = {m.name.tag: m.value for m in g.metric_values}
        check(abs(gm.get("validation/validation_accuracy", -1) - acc) < 1e-6,
              f"{group}: the group's accuracy {gm}")

    # A filter as the dashboard sends it: optimizer "sgd" keeps trial 1 only.
    request.col_params.add(hparam="optimizer", filter_discrete=listv("sgd"))
    resp = list_session_groups.Handler(req_ctx, ctx, "", request).run()
    check([g.name for g in resp.session_groups] == ["trials/1"],
          f"filtered groups {[g.name for g in resp.session_groups]}")


# ---- 4. torch's hparams() and TensorBoard's summary_v2 ---------------------------

def check_torch(contents):
    from torch.utils.tensorboard import summary as torch_summary

    exp, ssi, sei = torch_summary.hparams(TORCH_HP, {t: 0.0 for t in METRICS},
                                          hparam_domain_discrete=TORCH_DOMAINS)
    ours = contents.get("torch", [])
    check(len(ours) == 3, "torch-like run: three hparams records")
    if len(ours) != 3:
        return
    # torch sets no experiment time, no start time (some versions take
    # time.time()) and no end time: those fields are set to ours.
    times = [("experiment", "time_created_secs"), ("session_start_info", "start_time_secs"),
             ("session_end_info", "end_time_secs")]
    for summary, content, (which, field) in zip((exp, ssi, sei), ours, times):
        tv = summary.value[0]
        mine = plugin_data_pb2.HParamsPluginData.FromString(content)
        theirs = plugin_data_pb2.HParamsPluginData.FromString(tv.metadata.plugin_data.content)
        check(theirs.WhichOneof("data") == which, f"torch wrote {theirs.WhichOneof('data')}")
        setattr(getattr(theirs, which), field, getattr(getattr(mine, which), field))
        check(mine == theirs, f"torch {which}: ours\n{mine}\ntorch's\n{theirs}")
        want = theirs.SerializeToString(deterministic=True)
        check(content == want, f"torch {which}: bytes {content.hex()} vs {want.hex()}")
        # The whole Value: tag, no data, the same metadata.
        value, _ = hparams_value(0, tv.tag, content)
        patched = summary_pb2.Summary.Value()
        patched.CopyFrom(tv)
        patched.metadata.plugin_data.content = theirs.SerializeToString(deterministic=True)
        check(value.SerializeToString() == patched.SerializeToString(),
              f"torch {which}: the Value's bytes")


def check_summary_v2(contents):
    """TensorBoard's own writer for intervals, bools and group names."""
    logs = contents.get("logs", [])
    if logs:
        config = hp_v2.hparams_config_pb(
            hparams=[hp_v2.HParam("lr", hp_v2.Discrete([0.1, 0.01, 0.001])),
                     hp_v2.HParam("optimizer", hp_v2.Discrete(["sgd", "adam"])),
                     hp_v2.HParam("dropout", hp_v2.RealInterval(0.0, 0.5)),
                     hp_v2.HParam("use_bn", hp_v2.Discrete([True, False]))],
            metrics=[hp_v2.Metric(t) for t in METRICS], time_created_secs=1700000000.5)
        theirs = metadata.parse_experiment_plugin_data(config.value[0].metadata.plugin_data.content)
        # A domainless HParam of summary_v2 has no type; ours says it.
        theirs.hparam_infos.add(name="layers", type=FLOAT64)
        theirs.hparam_infos.add(name="note", type=STRING)
        check(plugin_data("experiment", theirs).SerializeToString(deterministic=True) == logs[0],
              "summary_v2 hparams_config_pb: the same experiment")
    for d, hp, trial_id, start in (("logs/trials/1", HP1, None, 1700000001.0),
                                   ("logs/trials/2", HP2, "trial-2", 1700000002.0)):
        got = contents.get(d, [])
        if not got:
            continue
        pb = hp_v2.hparams_pb(hp, trial_id=trial_id, start_time_secs=start)
        theirs = metadata.parse_session_start_info_plugin_data(
            pb.value[0].metadata.plugin_data.content)
        if trial_id is None:
            theirs.group_name = ""  # summary_v2 names the group by a hash of the values
        want = plugin_data("session_start_info", theirs).SerializeToString(deterministic=True)
        check(want == got[0],
              f"summary_v2 hparams_pb: the same session start for {d}")


def main():
    program = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ct_tb_hparams_") as workdir:
        subprocess.run([program, os.path.join(workdir, "logs"), os.path.join(workdir, "torch")],
                       check=True)
        contents = check_records(workdir, expected_runs())
        mux, logdir = check_loading(workdir)
        check_dashboard(mux, logdir)
        check_torch(contents)
        check_summary_v2(contents)
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        return 1
    print("tb_hparams read-back: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
