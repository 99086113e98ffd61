/* src/formats/tb_hparams.h — the summaries of TensorBoard's HParams plugin,
 * written without a protobuf library into event files of tbevents.h. Internal
 * to ctrial: a hyperparameter search writes them so that TensorBoard's
 * HPARAMS dashboard lists its trials, one row per trial with its
 * hyperparameters and its last validation metrics.
 *
 * TensorBoard reads an experiment from three summaries: the experiment (the
 * hyperparameters' names, types and domains, and the metrics' tags: the
 * dashboard's columns), written once in any run, usually the logdir's top;
 * and for each session (one trial) a session start (its hyperparameter
 * values) and a session end (its status) in the session's own run, the
 * directory whose scalars hold the session's metrics:
 *
 *     exp/events.out.tfevents...                 experiment
 *     exp/trials/1/events.out.tfevents...        session start, scalars, end
 *     exp/trials/2/events.out.tfevents...        session start, scalars, end
 *
 *     static const cti_tb_hp_value lr_grid[] = {{.kind = CT_TB_HP_NUMBER, .number = 0.1},
 *                                              {.kind = CT_TB_HP_NUMBER, .number = 0.01}};
 *     const cti_tb_hp_info hps[] = {
 *         {.name = "lr", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_DISCRETE,
 *          .values = lr_grid, .n_values = 2},
 *         {.name = "dropout", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_INTERVAL,
 *          .min = 0.0, .max = 0.5},
 *     };
 *     const char *const metrics[] = {"validation/validation_accuracy"};
 *     cti_tb_writer *e = cti_tb_open("exp", ".hparams");
 *     int rc = e ? cti_tb_add_hparams_experiment(e, hps, 2, metrics, 1, 0) : ct_last_code();
 *     cti_tb_close(e);
 *
 *     const cti_tb_hp_value v[] = {{.name = "lr", .kind = CT_TB_HP_NUMBER, .number = 0.1},
 *                                 {.name = "dropout", .kind = CT_TB_HP_NUMBER, .number = 0.25}};
 *     cti_tb_writer *s = cti_tb_open("exp/trials/1", ".hparams");
 *     rc = cti_tb_add_hparams_session_start(s, NULL, v, 2, 0);
 *     ... the trial trains, its scalars going to exp/trials/1 ...
 *     rc = cti_tb_add_hparams_session_end(s, CT_TB_HP_STATUS_SUCCESS, 0);
 *     cti_tb_close(s);
 *
 * Each function writes one Event{wall_time, summary: Summary{value:
 * [Value{tag, metadata: SummaryMetadata{plugin_data: {plugin_name:
 * "hparams", content}}}]}} (step 0, so left out; no simple_value or tensor,
 * as torch.utils.tensorboard.summary.hparams() writes), whose content is a
 * serialized tensorboard.hparams.HParamsPluginData{version: 0, and one of
 * experiment / session_start_info / session_end_info}
 * (tensorboard/plugins/hparams/plugin_data.proto, api.proto), with the tag
 * "_hparams_/experiment", "_hparams_/session_start_info" or
 * "_hparams_/session_end_info". Encoding is protobuf's canonical one:
 * fields in number order, proto3 defaults left out (a oneof member is
 * written even when zero), map entries sorted by key as protobuf's
 * deterministic serialization sorts them, so the content's bytes are
 * Python's SerializeToString(deterministic=True) of the same message.
 *
 * TensorBoard keeps the first metadata it reads for a run's tag and ignores
 * later ones: write each summary once per run, the session end when the
 * trial has ended (a RUNNING end written first would stay). And TensorBoard,
 * once it reads a newer event file of a directory (names sort by their
 * creation second), no longer reads older ones as they grow (unless started
 * with --reload_multifile): a summary written into an older file of a run
 * shows up after TensorBoard restarts.
 *
 * Errors: 0 or a negative CT_E* code, with ct_last_error() naming the
 * function, the file and the problem (which argument, which index, which
 * name). A refused call writes nothing and the writer stays usable;
 * write failures are the writer's (tbevents.h: CT_EIO, then CT_ESTATE).
 * Strings are borrowed for the call. A call builds its record's content on
 * the stack, or on the heap once when it is larger than 512 bytes (then
 * CT_ENOMEM when that fails).
 */
#ifndef CTRIAL_FORMATS_TB_HPARAMS_H
#define CTRIAL_FORMATS_TB_HPARAMS_H

#include <stddef.h>

#include "formats/tbevents.h"

/* A hyperparameter's type: api.proto's DataType FLOAT64, STRING, BOOL. */
typedef enum { CT_TB_HP_NUMBER, CT_TB_HP_STRING, CT_TB_HP_BOOL } cti_tb_hp_kind;

/* A hyperparameter's value, a google.protobuf.Value (number_value,
 * string_value or bool_value, by kind). `name` is the hyperparameter's in a
 * session start; in a domain's list of values it is not read. */
typedef struct {
    const char *name;   /* non-empty UTF-8 */
    cti_tb_hp_kind kind;
    double number;      /* CT_TB_HP_NUMBER: finite (TensorBoard's JSON has no NaN, inf) */
    const char *string; /* CT_TB_HP_STRING: UTF-8, possibly "" */
    int boolean;        /* CT_TB_HP_BOOL: 0 is false, anything else true */
} cti_tb_hp_value;

/* A hyperparameter's domain: none, an interval (numbers only), a list. */
typedef enum { CT_TB_HP_ANY, CT_TB_HP_INTERVAL, CT_TB_HP_DISCRETE } cti_tb_hp_domain;

/* An experiment's hyperparameter: api.proto's HParamInfo{name, type,
 * domain_discrete | domain_interval}. The dashboard shows a discrete
 * domain's values as checkboxes and an interval as min/max filters. */
typedef struct {
    const char *name; /* non-empty UTF-8, unique in the experiment */
    cti_tb_hp_kind kind;
    cti_tb_hp_domain domain;
    double min, max;              /* CT_TB_HP_INTERVAL: finite, min <= max */
    const cti_tb_hp_value *values; /* CT_TB_HP_DISCRETE: n_values >= 1 values of `kind` */
    size_t n_values;
} cti_tb_hp_info;

/* A session's end: api.proto's Status. */
typedef enum {
    CT_TB_HP_STATUS_UNKNOWN = 0,
    CT_TB_HP_STATUS_SUCCESS = 1,
    CT_TB_HP_STATUS_FAILURE = 2,
    CT_TB_HP_STATUS_RUNNING = 3,
} cti_tb_hp_status;

/* Appends the experiment, tag "_hparams_/experiment": Experiment{
 * time_created_secs: wall_time, hparam_infos: [one HParamInfo{name, type,
 * domain} per hps[i], in this order (the dashboard sorts them by name)],
 * metric_infos: [MetricInfo{name: MetricName{tag}} per metric_tags[i], in
 * this order]}. The metric tags are
 * scalar tags of the sessions' runs (group "": the session's own run), such
 * as "validation/validation_accuracy"; TensorBoard shows each session's last
 * value of each. torch's hparams() writes the same, less
 * time_created_secs, which TensorBoard's own hparams_config sets as here.
 * wall_time: Unix seconds, also the Event's; <= 0 means now.
 *
 * Returns 0, or CT_EINVAL (nothing written) for a NULL writer; NULL hps or
 * metric_tags with a count > 0; a NULL, empty, non-UTF-8 or repeated name
 * or metric tag; a bad kind or domain; an interval of a string or bool, or
 * with a non-finite bound or min > max; an empty discrete list, or one with
 * a value of another kind, a NaN or infinite number, a NULL or non-UTF-8
 * string; a non-finite wall_time. Or CT_ENOMEM, CT_ESTATE, CT_EIO. */
int cti_tb_add_hparams_experiment(cti_tb_writer *w, const cti_tb_hp_info *hps, size_t n_hps,
                                 const char *const *metric_tags, size_t n_metrics,
                                 double wall_time);

/* Appends a session's start, tag "_hparams_/session_start_info":
 * SessionStartInfo{hparams: {values[i].name: values[i]} (a map, written
 * sorted by name), group_name, start_time_secs: start_time}. Sessions of one
 * group_name are one row of the dashboard (repeats of the same
 * hyperparameters, their metrics averaged); NULL or "" leaves it out and
 * TensorBoard uses the run's name (its path under the logdir), so each
 * session is a row of its own. torch's hparams() writes the same map, with
 * no group name and no start time. start_time: Unix seconds, also the
 * Event's; <= 0 means now.
 *
 * Returns 0, or CT_EINVAL (nothing written) for a NULL writer, NULL values
 * with n > 0, a NULL, empty, non-UTF-8 or repeated name, a bad kind, a NaN
 * or infinite number, a NULL or non-UTF-8 string value, a non-UTF-8
 * group_name, a non-finite start_time. Or CT_ENOMEM, CT_ESTATE, CT_EIO. */
int cti_tb_add_hparams_session_start(cti_tb_writer *w, const char *group_name,
                                    const cti_tb_hp_value *values, size_t n, double start_time);

/* Appends a session's end, tag "_hparams_/session_end_info":
 * SessionEndInfo{status, end_time_secs: end_time}. The dashboard's status
 * column; a session with no end shows as STATUS_UNKNOWN. end_time: Unix
 * seconds, also the Event's; <= 0 means now.
 *
 * Returns 0, or CT_EINVAL (nothing written) for a NULL writer, a status
 * outside 0..3, a non-finite end_time. Or CT_ESTATE, CT_EIO. */
int cti_tb_add_hparams_session_end(cti_tb_writer *w, cti_tb_hp_status status, double end_time);

#endif
