/*
 * charlm — a character-level language model on tiny shakespeare, a minimal
 * GPT (hparam "model": "gpt", the default) or an LSTM ("lstm"), trained as
 * a Determined trial by ct_main, then sampled from its checkpoint.
 *
 * The PyTorch it mirrors: the GPT of nanoGPT's model.py (Karpathy), at
 * the size of its shakespeare_char config scaled down, with makemore's
 * plain PyTorch initialisation and no weight tying; nanoGPT's data (90/10
 * split, random windows, y = x shifted by one), AdamW with weight decay on
 * the matrices only and gradient clipping at 1.0:
 *
 *     class CausalSelfAttention(nn.Module):
 *         def __init__(self, n_embd, n_head, dropout):
 *             super().__init__()
 *             self.c_attn = nn.Linear(n_embd, 3 * n_embd)
 *             self.c_proj = nn.Linear(n_embd, n_embd)
 *             self.resid_dropout = nn.Dropout(dropout)
 *             self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout
 *         def forward(self, x):
 *             B, T, C = x.size()
 *             q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
 *             q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # and k, v
 *             y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True,
 *                                                dropout_p=self.dropout if self.training else 0)
 *             y = y.transpose(1, 2).contiguous().view(B, T, C)
 *             return self.resid_dropout(self.c_proj(y))
 *
 *     class MLP(nn.Module):            # c_fc (n -> 4n), gelu, c_proj (4n -> n), dropout
 *         def forward(self, x):
 *             return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
 *
 *     class Block(nn.Module):          # pre-LayerNorm
 *         def forward(self, x):
 *             x = x + self.attn(self.ln_1(x))
 *             return x + self.mlp(self.ln_2(x))
 *
 *     class GPT(nn.Module):
 *         def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout):
 *             super().__init__()
 *             self.transformer = nn.ModuleDict(dict(
 *                 wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd),
 *                 drop=nn.Dropout(dropout),
 *                 h=nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)]),
 *                 ln_f=nn.LayerNorm(n_embd)))
 *             self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
 *         def forward(self, idx):
 *             pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
 *             x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
 *             for block in self.transformer.h:
 *                 x = block(x)
 *             return self.lm_head(self.transformer.ln_f(x))
 *
 * or PyTorch's examples/word_language_model RNNModel (LSTM, untied weights,
 * batch first; a fresh zero state for every window, which are random):
 *
 *     class RNNModel(nn.Module):
 *         def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
 *             super().__init__()
 *             self.drop = nn.Dropout(dropout)
 *             self.encoder = nn.Embedding(ntoken, ninp)
 *             self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
 *             self.decoder = nn.Linear(nhid, ntoken)
 *             initrange = 0.1
 *             nn.init.uniform_(self.encoder.weight, -initrange, initrange)
 *             nn.init.zeros_(self.decoder.bias)
 *             nn.init.uniform_(self.decoder.weight, -initrange, initrange)
 *         def forward(self, input, hidden=None):
 *             emb = self.drop(self.encoder(input))
 *             output, hidden = self.rnn(emb, hidden)
 *             return self.decoder(self.drop(output)), hidden
 *
 *     class CharLMTrial(PyTorchTrial):
 *         def __init__(self, context):
 *             text = open(path).read()
 *             chars = sorted(set(text)); stoi = {c: i for i, c in enumerate(chars)}
 *             data = torch.tensor([stoi[c] for c in text])
 *             n = int(0.9 * len(data)); self.train_data, self.val_data = data[:n], data[n:]
 *             model = context.wrap_model(GPT(len(chars), ...) if hparam model == "gpt"
 *                                        else RNNModel(len(chars), n_embd, hidden_size, n_layer, dropout))
 *             decay = [p for p in model.parameters() if p.dim() >= 2]
 *             no_decay = [p for p in model.parameters() if p.dim() < 2]
 *             self.opt = context.wrap_optimizer(torch.optim.AdamW(
 *                 [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
 *                 lr=lr, betas=(0.9, 0.99), fused=device == "cuda"))
 *             if context.get_hparam("amp"): context.experimental.use_amp()   # bf16 or fp16
 *
 *         def build_training_data_loader(self):   # item i: the window at offset i
 *             return DataLoader(Windows(self.train_data, block_size, stride=1), shuffle=True, ...)
 *         def build_validation_data_loader(self): # non-overlapping windows
 *             return DataLoader(Windows(self.val_data, block_size, stride=block_size), ...)
 *
 *         def train_batch(self, batch, epoch_idx, batch_idx):
 *             x, y = batch
 *             logits = self.model(x)                  # RNNModel: logits, _ = self.model(x)
 *             loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
 *             self.context.backward(loss)
 *             self.context.step_optimizer(self.opt, clip_grads=lambda params:
 *                 torch.nn.utils.clip_grad_norm_(params, grad_clip))
 *             return {"loss": loss}
 *
 *         def evaluate_full_dataset(self, loader):
 *             total = sum(F.cross_entropy(self.model(x).flatten(0, 1), y.flatten(),
 *                                         reduction="sum") for x, y in loader)
 *             loss = total / n_tokens
 *             return {"validation_loss": loss, "validation_perplexity": loss.exp()}
 *
 * A training sample is a random window of the text: the dataset's item i is
 * the window at offset i (x = text[i : i+T], y = text[i+1 : i+T+1]) and the
 * loader's reproducible shuffle picks the offsets, so the order, the resume
 * position and the sharding under mpirun are the loader's, as with any
 * dataset (nanoGPT draws offsets with torch.randint instead).
 *
 * Characters are bytes: the vocabulary is the sorted set of bytes of the
 * whole text (65 for tiny shakespeare), rebuilt from the text whenever the
 * trial is built, so sampling needs the same text as training.
 *
 * Or the tokens come from llm.c's shards (data.train_shards, val_shards,
 * vocab_size; ct_dataset_shards), mapped, windows never crossing a shard's
 * end; `charlm shard TEXT DIR` writes the text's indices as such shards,
 * split 90/10, and training from them equals training from the text:
 *
 *     def shard(path):   # llm.c's dev/data/data_common.py format
 *         header = np.fromfile(path, dtype=np.int32, count=256)
 *         assert header[0] == 20240520 and header[1] == 1
 *         return torch.from_numpy(np.memmap(path, np.uint16, "r", 1024, (header[2],)).astype(np.int64))
 *     train = ConcatDataset([Windows(shard(p), block_size, stride=1) for p in sorted(glob(train_shards))])
 *     val = ConcatDataset([Windows(shard(p), block_size, stride=block_size) for p in sorted(glob(val_shards))])
 *
 * The text is then read only to sample (its characters name the indices).
 *
 * The RNNModel is a module of several inputs and outputs (ct_nn_module_value):
 * called with ct_nn_callf, it takes (input, hidden) and returns (logits,
 * hidden), and its nn.LSTM returns (output, (h_n, c_n)), as in Python.
 *
 * Or the model is any language model exported from Python (hparam "model":
 * "exported", "model_file": a .pt2 archive of tools/export_model.py; see
 * ctrial/export.h): int64 tokens [N, T] in, logits [N, T, V] out (or a
 * tuple whose first element they are, as RNNModel's). The archive says T
 * when the sequence length was exported static (block_size is then T) and
 * V, which must be the text's vocabulary; the rest is as above. Sampling
 * feeds it the last T tokens, the context left-padded with the first
 * character of the vocabulary while shorter than a static T (a dynamic T
 * takes the context as it grows, as nanoGPT's generate).
 *
 * Usage (from the repository root):
 *     build/examples/charlm/charlm --config examples/charlm/charlm.json
 *     build/examples/charlm/charlm --config examples/charlm/charlm_lstm.json
 *     build/examples/charlm/charlm --config examples/charlm/charlm.json \
 *         --hparam model=exported --hparam model_file=gpt.pt2
 *     build/examples/charlm/charlm sample output/checkpoints/ckpt-... --tokens 500
 *     build/examples/charlm/charlm shard examples/data/tinyshakespeare/input.txt.gz out/charlm_shards
 *     build/examples/charlm/charlm --config examples/charlm/charlm_shards.json
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include <ctrial/ctrial.h>

#define DEFAULT_TEXT "examples/data/tinyshakespeare/input.txt.gz"
#define MAX_LAYERS 64

/* What main needs after ct_main returns: the last checkpoint rank 0 wrote,
 * the device it trained on, the text it read and the sampling hparams. */
static struct {
    char checkpoint[4096];
    char device[32];
    char text_path[4096];
    bool text_flag;       /* charlm sample --data: the text for a shard-trained model */
    bool sampling;        /* the trial is built to sample, not to train */
    int64_t sample_tokens;
    double temperature;
} g_run = {.text_path = DEFAULT_TEXT};

/* ---- the text ------------------------------------------------------------ */

typedef struct {
    uint8_t *ids;         /* the whole text as vocabulary indices */
    int64_t n;
    int vocab_size;
    char itos[256];       /* index -> character */
    int stoi[256];        /* character -> index, -1: not in the text */
} Text;

/* The file (plain or gzip: zlib reads both) into memory. */
static int read_text(const char *path, uint8_t **out, int64_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) return ct_set_error(CT_EIO, "cannot open %s: %s", path, strerror(errno ? errno : ENOENT));
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    int got = 0;
    while (buf && (got = gzread(f, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)got;
        if (len == cap) {
            uint8_t *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    int err = 0;
    const char *msg = buf && got < 0 ? gzerror(f, &err) : NULL;
    int rc = !buf ? ct_set_error(CT_ENOMEM, "out of memory reading %s", path)
             : msg ? ct_set_error(CT_EIO, "%s: %s", path, msg)
                   : CT_OK;
    gzclose(f);
    if (rc == CT_OK && len < 2) rc = ct_set_error(CT_EFORMAT, "%s: the text is empty", path);
    if (rc != CT_OK) {
        free(buf);
        return rc;
    }
    *out = buf;
    *n = (int64_t)len;
    return CT_OK;
}

/* chars = sorted(set(text)); data = [stoi[c] for c in text] */
static int text_load(Text *t, const char *path) {
    if (read_text(path, &t->ids, &t->n) != CT_OK) return ct_last_code();
    bool seen[256] = {false};
    for (int64_t i = 0; i < t->n; i++) seen[t->ids[i]] = true;
    t->vocab_size = 0;
    for (int c = 0; c < 256; c++) {
        t->stoi[c] = seen[c] ? t->vocab_size : -1;
        if (seen[c]) t->itos[t->vocab_size++] = (char)c;
    }
    for (int64_t i = 0; i < t->n; i++) t->ids[i] = (uint8_t)t->stoi[t->ids[i]];
    return CT_OK;
}

/* ---- the dataset: windows of a run of the text ---------------------------- */

/* Item i is (x, y) = (ids[o : o+T], ids[o+1 : o+T+1]) with o = i * stride.
 * Read-only after creation: the loader's workers may call it at once. */
typedef struct {
    const uint8_t *ids;   /* borrowed from the trial's Text, which outlives the loaders */
    int64_t block, stride, count;
} Windows;

static int64_t windows_len(void *self) { return ((Windows *)self)->count; }

/* The collated batch ([n, T] int64 x and y), written straight into the
 * tensors: the fast path the loader takes. */
static ct_value *windows_get_batch(void *self, const int64_t *indices, int64_t n) {
    const Windows *w = self;
    ct_tensor *x = ct_empty(CT_SHAPE(n, w->block), &(ct_topts){.dtype = CT_I64});
    ct_tensor *y = x ? ct_empty(CT_SHAPE(n, w->block), &(ct_topts){.dtype = CT_I64}) : NULL;
    int64_t *px = y ? ct_data_ptr(x) : NULL, *py = px ? ct_data_ptr(y) : NULL;
    if (!py) {
        ct_tensor_free(x);
        ct_tensor_free(y);
        return NULL;
    }
    for (int64_t b = 0; b < n; b++) {
        const uint8_t *src = w->ids + indices[b] * w->stride;
        for (int64_t j = 0; j < w->block; j++) {
            px[b * w->block + j] = src[j];
            py[b * w->block + j] = src[j + 1];
        }
    }
    ct_value *tuple = ct_value_tuple();
    ct_value_list_append(tuple, ct_value_tensor(x));
    ct_value_list_append(tuple, ct_value_tensor(y));
    return tuple;
}

static ct_value *windows_get(void *self, int64_t index) {
    ct_value *batch = windows_get_batch(self, &index, 1);
    if (!batch) return NULL;
    ct_value *sample = ct_value_tuple(); /* drop the batch dim: [T] each */
    for (size_t k = 0; k < 2; k++)
        ct_value_list_append(sample, ct_value_tensor(ct_keep(ct_select(ct_batch_at(batch, k), 0, 0))));
    ct_value_free(batch);
    return sample;
}

static ct_dataset *windows_new(const uint8_t *ids, int64_t n, int64_t block, int64_t stride) {
    if (n < block + 1) {
        ct_set_error(CT_ECONFIG, "a split of %" PRId64 " characters is too short for windows of %" PRId64, n, block);
        return NULL;
    }
    Windows *w = malloc(sizeof *w);
    if (!w) {
        ct_set_error(CT_ENOMEM, "charlm: out of memory");
        return NULL;
    }
    *w = (Windows){ids, block, stride, (n - block - 1) / stride + 1};
    static const ct_dataset_vtable vt = {windows_len, windows_get, windows_get_batch, free};
    ct_dataset *d = ct_dataset_new(&vt, w);
    if (!d) free(w);
    return d;
}

/* ---- the model ------------------------------------------------------------ */

typedef struct {
    ct_module *c_attn, *c_proj, *resid_dropout;
    int64_t n_head;
    double dropout;
} Attention;

static ct_tensor *attention_forward(ct_module *self, const ct_tensor *x) {
    Attention *a = ct_nn_user(self);
    int64_t B = ct_size(x, 0), T = ct_size(x, 1), C = ct_size(x, 2), hs = C / a->n_head;
    ct_tensor *qkv[3] = {NULL, NULL, NULL};
    if (ct_split(ct_nn_forward(a->c_attn, x), C, 2, qkv, 3) != 3) return NULL;
    for (int i = 0; i < 3; i++) qkv[i] = ct_transpose(ct_view(qkv[i], CT_SHAPE(B, T, a->n_head, hs)), 1, 2);
    double p = ct_nn_is_training(self) ? a->dropout : 0.0;
    ct_tensor *y = ct_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, p, true, 0.0);
    y = ct_view(ct_contiguous(ct_transpose(y, 1, 2)), CT_SHAPE(B, T, C));
    return ct_nn_forward(a->resid_dropout, ct_nn_forward(a->c_proj, y));
}

typedef struct {
    ct_module *c_fc, *gelu, *c_proj, *dropout;
} Mlp;

static ct_tensor *mlp_forward(ct_module *self, const ct_tensor *x) {
    Mlp *m = ct_nn_user(self);
    return ct_nn_forward(m->dropout, ct_nn_forward(m->c_proj, ct_nn_forward(m->gelu, ct_nn_forward(m->c_fc, x))));
}

typedef struct {
    ct_module *ln_1, *attn, *ln_2, *mlp;
} Block;

static ct_tensor *block_forward(ct_module *self, const ct_tensor *x) {
    Block *b = ct_nn_user(self);
    ct_tensor *h = ct_add(x, ct_nn_forward(b->attn, ct_nn_forward(b->ln_1, x)));
    return ct_add(h, ct_nn_forward(b->mlp, ct_nn_forward(b->ln_2, h)));
}

typedef struct {
    int64_t vocab_size, block_size, n_layer, n_head, n_embd;
    double dropout;
} GPTConfig;

typedef struct {
    ct_module *wte, *wpe, *drop, *h[MAX_LAYERS], *ln_f, *lm_head;
    GPTConfig cfg;
} GPT;

static ct_tensor *gpt_forward(ct_module *self, const ct_tensor *idx) {
    GPT *g = ct_nn_user(self);
    if (!idx) return NULL; /* keeps the error that made it */
    int64_t T = ct_size(idx, 1);
    if (T < 1 || T > g->cfg.block_size) {
        ct_set_error(CT_ESHAPE, "GPT: a sequence of %" PRId64 " tokens; block_size is %" PRId64, T, g->cfg.block_size);
        return NULL;
    }
    ct_tensor *pos = ct_arange(0, (double)T, 1, &(ct_topts){.dtype = CT_I64, .device = ct_device_of(idx)});
    ct_tensor *x = ct_nn_forward(g->drop, ct_add(ct_nn_forward(g->wte, idx), ct_nn_forward(g->wpe, pos)));
    for (int64_t i = 0; i < g->cfg.n_layer; i++) x = ct_nn_forward(g->h[i], x);
    return ct_nn_forward(g->lm_head, ct_nn_forward(g->ln_f, x));
}

/* A user module with a calloc'ed user struct; NULL + error on failure. */
static ct_module *user_module(const char *type, ct_forward_fn fwd, size_t size, void **user) {
    *user = calloc(1, size);
    ct_module *m = *user ? ct_nn_module(type, fwd, *user, free) : NULL;
    if (!m) {
        free(*user);
        if (!*user) ct_set_error(CT_ENOMEM, "charlm: out of memory");
    }
    return m;
}

static ct_module *attention_new(const GPTConfig *c) {
    Attention *a;
    ct_module *m = user_module("CausalSelfAttention", attention_forward, sizeof *a, (void **)&a);
    if (!m) return NULL;
    a->n_head = c->n_head;
    a->dropout = c->dropout;
    a->c_attn = ct_nn_add_module(m, "c_attn", ct_nn_linear(c->n_embd, 3 * c->n_embd, true));
    a->c_proj = ct_nn_add_module(m, "c_proj", ct_nn_linear(c->n_embd, c->n_embd, true));
    a->resid_dropout = ct_nn_add_module(m, "resid_dropout", ct_nn_dropout(c->dropout));
    if (a->resid_dropout) return m;
    ct_nn_free(m);
    return NULL;
}

static ct_module *mlp_new(const GPTConfig *c) {
    Mlp *p;
    ct_module *m = user_module("MLP", mlp_forward, sizeof *p, (void **)&p);
    if (!m) return NULL;
    p->c_fc = ct_nn_add_module(m, "c_fc", ct_nn_linear(c->n_embd, 4 * c->n_embd, true));
    p->gelu = ct_nn_add_module(m, "gelu", ct_nn_gelu());
    p->c_proj = ct_nn_add_module(m, "c_proj", ct_nn_linear(4 * c->n_embd, c->n_embd, true));
    p->dropout = ct_nn_add_module(m, "dropout", ct_nn_dropout(c->dropout));
    if (p->c_fc && p->gelu && p->c_proj && p->dropout) return m;
    ct_nn_free(m);
    return NULL;
}

static ct_module *block_new(const GPTConfig *c) {
    Block *b;
    ct_module *m = user_module("Block", block_forward, sizeof *b, (void **)&b);
    if (!m) return NULL;
    b->ln_1 = ct_nn_add_module(m, "ln_1", ct_nn_layernorm(c->n_embd, NULL));
    b->attn = ct_nn_add_module(m, "attn", attention_new(c));
    b->ln_2 = ct_nn_add_module(m, "ln_2", ct_nn_layernorm(c->n_embd, NULL));
    b->mlp = ct_nn_add_module(m, "mlp", mlp_new(c));
    if (b->ln_1 && b->attn && b->ln_2 && b->mlp) return m;
    ct_nn_free(m);
    return NULL;
}

/* Modules are made in the order Python's __init__ makes them, so the same
 * seed gives the same weights as the Python model. State-dict names are
 * nanoGPT's: transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ... */
static ct_module *gpt_new(const GPTConfig *c) {
    GPT *g;
    ct_module *m = user_module("GPT", gpt_forward, sizeof *g, (void **)&g);
    if (!m) return NULL;
    g->cfg = *c;
    ct_module *tr = ct_nn_add_module(m, "transformer", ct_nn_module("ModuleDict", NULL, NULL, NULL));
    ct_module *h = NULL;
    if (tr) {
        g->wte = ct_nn_add_module(tr, "wte", ct_nn_embedding(c->vocab_size, c->n_embd, -1));
        g->wpe = ct_nn_add_module(tr, "wpe", ct_nn_embedding(c->block_size, c->n_embd, -1));
        g->drop = ct_nn_add_module(tr, "drop", ct_nn_dropout(c->dropout));
        h = ct_nn_add_module(tr, "h", ct_nn_module("ModuleList", NULL, NULL, NULL));
    }
    bool ok = g->wte && g->wpe && g->drop && h;
    for (int64_t i = 0; ok && i < c->n_layer; i++) {
        char name[24];
        snprintf(name, sizeof name, "%" PRId64, i);
        ok = (g->h[i] = ct_nn_add_module(h, name, block_new(c))) != NULL;
    }
    if (ok) ok = (g->ln_f = ct_nn_add_module(tr, "ln_f", ct_nn_layernorm(c->n_embd, NULL))) != NULL;
    if (ok) ok = (g->lm_head = ct_nn_add_module(m, "lm_head", ct_nn_linear(c->n_embd, c->vocab_size, false))) != NULL;
    if (ok) return m;
    ct_nn_free(m);
    return NULL;
}

/* ---- the LSTM model ------------------------------------------------------- */

typedef struct {
    ct_module *drop, *encoder, *rnn, *decoder;
} RNNModel;

/* forward(input, hidden=None) -> (logits, hidden): a value module, called
 * with ct_nn_callf; hidden is the LSTM's (h, c) tuple, or None for zeros. */
static ct_value *rnn_model_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    RNNModel *r = ct_nn_user(self);
    size_t nargs = ct_value_len(args), nkw = ct_value_len(kwargs);
    const ct_value *hidden = nargs > 1 ? ct_value_list_get(args, 1) : ct_value_dict_get(kwargs, "hidden");
    ct_tensor *input = nargs > 0 ? ct_value_get_tensor(ct_value_list_get(args, 0)) : NULL;
    if (!input || nargs > 2 || nkw > (nargs == 1 && hidden ? 1u : 0u)) {
        ct_set_error(CT_EINVAL, "RNNModel.forward(input, hidden=None): got %zu positional and %zu keyword "
                                "arguments (input a tensor, hidden the LSTM's (h, c) or None)",
                     nargs, nkw);
        return NULL;
    }
    ct_tensor *emb = ct_nn_forward(r->drop, ct_nn_forward(r->encoder, input));
    if (!emb) return NULL;
    /* self.rnn(emb, hidden): (output, (h_n, c_n)) */
    ct_value *rnn_out = hidden ? ct_nn_callf(r->rnn, "t, v", emb, hidden) : ct_nn_callf(r->rnn, "t, n", emb);
    if (!rnn_out) return NULL; /* the LSTM's error, kept */
    ct_tensor *output = ct_value_get_tensor(ct_value_list_get(rnn_out, 0));
    ct_tensor *logits = output ? ct_nn_forward(r->decoder, ct_nn_forward(r->drop, output)) : NULL;
    ct_value *result = NULL;
    if (logits) {
        result = ct_value_tuple();
        ct_value_list_append(result, ct_value_tensor(logits));
        ct_value_list_append(result, ct_value_copy(ct_value_list_get(rnn_out, 1), false));
    }
    ct_value_free(rnn_out);
    return result;
}

typedef struct {
    int64_t vocab_size, n_embd, hidden_size, n_layer;
    double dropout;
} RNNConfig;

/* Made in Python's order (drop, encoder, rnn, decoder, then init_weights'
 * redraws), so the same seed gives the same weights; the state dict holds
 * encoder.weight, rnn.weight_ih_l0, ..., decoder.weight, decoder.bias. */
static ct_module *rnn_model_new(const RNNConfig *c) {
    RNNModel *r = calloc(1, sizeof *r);
    ct_module *m = r ? ct_nn_module_value("RNNModel", rnn_model_forward, r, free) : NULL;
    if (!m) {
        free(r);
        if (!r) ct_set_error(CT_ENOMEM, "charlm: out of memory");
        return NULL;
    }
    ct_rnn_opts lstm = ct_rnn_defaults();
    lstm.num_layers = c->n_layer;
    lstm.dropout = c->dropout;
    lstm.batch_first = true;
    r->drop = ct_nn_add_module(m, "drop", ct_nn_dropout(c->dropout));
    r->encoder = ct_nn_add_module(m, "encoder", ct_nn_embedding(c->vocab_size, c->n_embd, -1));
    r->rnn = ct_nn_add_module(m, "rnn", ct_nn_lstm(c->n_embd, c->hidden_size, &lstm));
    r->decoder = ct_nn_add_module(m, "decoder", ct_nn_linear(c->hidden_size, c->vocab_size, true));
    int rc = r->drop && r->encoder && r->rnn && r->decoder ? CT_OK : ct_last_code();
    ct_guard *g = ct_no_grad(); /* init_weights */
    if (rc == CT_OK) rc = ct_uniform_(ct_nn_get(r->encoder, "weight"), -0.1, 0.1);
    if (rc == CT_OK) rc = ct_zero_(ct_nn_get(r->decoder, "bias"));
    if (rc == CT_OK) rc = ct_uniform_(ct_nn_get(r->decoder, "weight"), -0.1, 0.1);
    ct_guard_end(g);
    if (rc == CT_OK) return m;
    ct_nn_free(m);
    return NULL;
}

/* AdamW over two groups, as nanoGPT's configure_optimizers: weight decay on
 * the matrices (linear weights, embeddings), none on biases and LayerNorm. */
static ct_optim *adamw_new(ct_module *model, const ct_adam_opts *o, bool fused) {
    size_t n = ct_nn_num_params(model), nd = 0, nn = 0;
    ct_tensor **decay = calloc(n ? n : 1, sizeof *decay), **no_decay = calloc(n ? n : 1, sizeof *no_decay);
    ct_optim *opt = decay && no_decay ? ct_optim_adamw(NULL, o) : NULL;
    if (!decay || !no_decay) ct_set_error(CT_ENOMEM, "charlm: out of memory");
    for (size_t i = 0; opt && i < n; i++) {
        ct_tensor *p = ct_nn_param_at(model, i, NULL);
        if (ct_ndim(p) >= 2) decay[nd++] = p;
        else no_decay[nn++] = p;
    }
    int rc = opt ? CT_OK : ct_last_code();
    if (rc == CT_OK && ct_optim_add_param_group(opt, nd, decay) < 0) rc = ct_last_code();
    if (rc == CT_OK && ct_optim_add_param_group(opt, nn, no_decay) < 0) rc = ct_last_code();
    if (rc == CT_OK) rc = ct_optim_set_option(opt, 1, "weight_decay", 0.0);
    for (size_t g = 0; rc == CT_OK && fused && g < 2; g++) rc = ct_optim_set_option(opt, g, "fused", 1);
    free(decay);
    free(no_decay);
    if (rc == CT_OK) return opt;
    ct_optim_free(opt);
    return NULL;
}

/* ---- the trial ------------------------------------------------------------ */

typedef struct {
    Text text;              /* from text: the tokens; from shards: the vocabulary, read to sample */
    int64_t n_train;        /* the first n_train characters train, the rest validate */
    char **train_shards, **val_shards; /* data.train_shards / val_shards: files or patterns; */
    int n_train_shards, n_val_shards;  /* none: the text's tokens train and validate */
    bool lstm;              /* hparam model: "gpt" (false) or "lstm" */
    bool exported;          /* hparam model "exported": a .pt2 archive's (model_file) */
    bool static_length;     /* the exported model takes exactly block_size tokens */
    GPTConfig cfg;          /* the GPT's; vocab_size and block_size serve both models */
    RNNConfig rnn;          /* the LSTM's */
    ct_module *model;
    ct_optim *opt;
    double grad_clip;       /* <= 0: none */
    int workers;
} CharLM;

/* A data.train_shards / data.val_shards entry: a string (a shard file or a
 * glob pattern) or a non-empty list of them, copied. */
static int shard_list(const ct_value *v, const char *key, char ***out, int *n) {
    ct_value_kind k = ct_value_kind_of(v);
    size_t len = k == CT_VALUE_STR ? 1 : k == CT_VALUE_LIST ? ct_value_len(v) : 0;
    if (len == 0 || len > 4096)
        return ct_set_error(CT_ECONFIG, "data.%s must be a shard file or glob pattern, or a list of them", key);
    char **a = calloc(len, sizeof *a);
    if (!a) return ct_set_error(CT_ENOMEM, "charlm: out of memory");
    *out = a;
    for (size_t i = 0; i < len; i++) {
        const char *str = ct_value_get_str(k == CT_VALUE_STR ? v : ct_value_list_get(v, i));
        if (!str) return ct_set_error(CT_ECONFIG, "data.%s[%zu] must be a string (a file or glob pattern)", key, i);
        if (!(a[i] = strdup(str))) return ct_set_error(CT_ENOMEM, "charlm: out of memory");
        *n = (int)i + 1;
    }
    return CT_OK;
}

/* The config's "data": {"path": text file, "train_fraction": 0.9, "workers": 0}
 * to train from a text, or {"train_shards": files or patterns, "val_shards":
 * ..., "vocab_size": N, "path": the text whose vocabulary the shards use
 * (read only to sample), "workers": 0} to train from llm.c shards. */
static int read_data_config(ct_context *ctx, CharLM *t, const char **path, double *fraction, int64_t *workers,
                            int64_t *vocab_size) {
    const ct_value *data = ct_ctx_data_config(ctx);
    const ct_value *p = ct_value_dict_get(data, "path"), *f = ct_value_dict_get(data, "train_fraction"),
                   *w = ct_value_dict_get(data, "workers"), *ts = ct_value_dict_get(data, "train_shards"),
                   *vs = ct_value_dict_get(data, "val_shards"), *v = ct_value_dict_get(data, "vocab_size");
    *path = p ? ct_value_get_str(p) : g_run.text_path;
    *fraction = 0.9;
    *workers = 0;
    *vocab_size = 0;
    if (!*path) return ct_set_error(CT_ECONFIG, "data.path must be a string (a text file, plain or .gz)");
    if (f && (ct_value_get_float(f, fraction) != 0 || !(*fraction > 0 && *fraction < 1)))
        return ct_set_error(CT_ECONFIG, "data.train_fraction must be a number between 0 and 1");
    if (w && (ct_value_get_int(w, workers) != 0 || *workers < 0))
        return ct_set_error(CT_ECONFIG, "data.workers must be an integer >= 0");
    if (!ts && !vs && !v) return CT_OK; /* from the text */
    if (!ts || !vs || !v)
        return ct_set_error(CT_ECONFIG, "training from shards needs data.train_shards, data.val_shards and "
                                        "data.vocab_size (missing data.%s)",
                            !ts ? "train_shards" : !vs ? "val_shards" : "vocab_size");
    if (f)
        return ct_set_error(CT_ECONFIG, "data.train_fraction splits data.path's text; with data.train_shards the "
                                        "shards are the split");
    if (ct_value_get_int(v, vocab_size) != 0 || *vocab_size < 1)
        return ct_set_error(CT_ECONFIG, "data.vocab_size must be an integer >= 1");
    if (shard_list(ts, "train_shards", &t->train_shards, &t->n_train_shards) != CT_OK ||
        shard_list(vs, "val_shards", &t->val_shards, &t->n_val_shards) != CT_OK)
        return ct_last_code();
    return CT_OK;
}

static void charlm_destroy(void *self) {
    CharLM *t = self;
    if (!t) return;
    free(t->text.ids);
    for (int i = 0; i < t->n_train_shards; i++) free(t->train_shards[i]);
    for (int i = 0; i < t->n_val_shards; i++) free(t->val_shards[i]);
    free(t->train_shards);
    free(t->val_shards);
    free(t);
}

/* An exported language model: int64 [N, T] -> logits [N, T, V] (or a
 * tuple that starts with them), checked against the text and the config;
 * a static T is the block size. */
static ct_module *exported_new(ct_context *ctx, CharLM *t, const char *path) {
    ct_module *m = ct_nn_load_exported(path, NULL);
    if (!m) return NULL;
    ct_exported_tensor in, out;
    int rc = ct_nn_exported_input(m, 0, &in);
    if (!rc) rc = ct_nn_exported_output(m, 0, &out);
    if (!rc && (in.dtype != CT_I64 || in.ndim != 2))
        rc = ct_set_error(CT_ECONFIG, "%s: the model's input '%s' must be int64 tokens [N, T]", path, in.name);
    else if (!rc && (out.ndim != 3 || (out.size[2] >= 0 && out.size[2] != t->cfg.vocab_size)))
        rc = ct_set_error(CT_ECONFIG, "%s: the model must return logits [N, T, %lld] (the text's vocabulary), "
                          "not of %d dimensions ending in %lld", path, (long long)t->cfg.vocab_size, out.ndim,
                          (long long)(out.ndim ? out.size[out.ndim - 1] : 0));
    if (!rc && in.size[1] > 0) {
        if (ct_value_dict_get(ct_ctx_hparams(ctx), "block_size") && t->cfg.block_size != in.size[1])
            rc = ct_set_error(CT_ECONFIG, "%s: the model takes %lld tokens, hyperparameter block_size is %lld", path,
                              (long long)in.size[1], (long long)t->cfg.block_size);
        t->cfg.block_size = in.size[1];
        t->static_length = true;
    }
    if (rc) {
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

static int use_amp(ct_context *ctx, const char *amp) {
    if (!amp[0]) return CT_OK;
    ct_amp_opts o = ct_amp_defaults();
    if (strcmp(amp, "bf16") == 0) o.dtype = CT_BF16;
    else if (strcmp(amp, "fp16") == 0) o.dtype = CT_F16;
    else return ct_set_error(CT_ECONFIG, "hyperparameter 'amp' must be \"\", \"bf16\" or \"fp16\", not \"%s\"", amp);
    return ct_ctx_use_amp(ctx, &o);
}

static void *charlm_init(ct_context *ctx) {
    CharLM *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "charlm: out of memory");
        return NULL;
    }
    bool on_gpu = ct_ctx_device(ctx).type == CT_CUDA;
    ct_clear_error(); /* a mistyped hparam records an error and gives the default: check once */
    const char *model = ct_ctx_hparam_str(ctx, "model", "gpt");
    const char *model_file = ct_ctx_hparam_str(ctx, "model_file", "");
    t->lstm = strcmp(model, "lstm") == 0;
    t->exported = strcmp(model, "exported") == 0;
    t->cfg = (GPTConfig){
        .block_size = ct_ctx_hparam_int(ctx, "block_size", 64),
        .n_layer = ct_ctx_hparam_int(ctx, "n_layer", 2),
        .n_head = t->lstm ? 1 : ct_ctx_hparam_int(ctx, "n_head", 4),
        .n_embd = ct_ctx_hparam_int(ctx, "n_embd", t->lstm ? 64 : 128),
        .dropout = ct_ctx_hparam_double(ctx, "dropout", 0.1),
    };
    t->rnn = (RNNConfig){.n_embd = t->cfg.n_embd, .n_layer = t->cfg.n_layer, .dropout = t->cfg.dropout,
                         .hidden_size = t->lstm ? ct_ctx_hparam_int(ctx, "hidden_size", 128) : 1};
    ct_adam_opts adamw = ct_adamw_defaults();
    adamw.lr = ct_ctx_hparam_double(ctx, "learning_rate", 1e-3);
    adamw.beta2 = ct_ctx_hparam_double(ctx, "beta2", 0.99);
    adamw.weight_decay = ct_ctx_hparam_double(ctx, "weight_decay", 0.1);
    t->grad_clip = ct_ctx_hparam_double(ctx, "grad_clip", 1.0);
    bool fused = ct_ctx_hparam_bool(ctx, "fused", on_gpu); /* nanoGPT: fused AdamW on CUDA */
    const char *amp = ct_ctx_hparam_str(ctx, "amp", "");
    g_run.sample_tokens = ct_ctx_hparam_int(ctx, "sample_tokens", 500);
    g_run.temperature = ct_ctx_hparam_double(ctx, "temperature", 0.8);
    if (ct_last_code() != CT_OK) goto fail;
    if (!t->lstm && !t->exported && strcmp(model, "gpt") != 0) {
        ct_set_error(CT_ECONFIG, "hyperparameter 'model' must be \"gpt\", \"lstm\" or \"exported\", not \"%s\"",
                     model);
        goto fail;
    }
    if (t->exported != (model_file[0] != 0)) {
        ct_set_error(CT_ECONFIG, t->exported ? "hyperparameter 'model_file' must name the .pt2 archive of model "
                                               "\"exported\" (tools/export_model.py writes one)"
                                             : "hyperparameter 'model_file' is for model \"exported\" only");
        goto fail;
    }
    const GPTConfig *c = &t->cfg;
    if (c->block_size < 1 || c->n_layer < 1 || c->n_layer > MAX_LAYERS || c->n_head < 1 || c->n_embd < 1 ||
        c->n_embd % c->n_head != 0 || t->rnn.hidden_size < 1 || !(c->dropout >= 0 && c->dropout < 1)) {
        ct_set_error(CT_ECONFIG, "charlm: needs block_size >= 1, 1 <= n_layer <= %d, n_embd a multiple of n_head, "
                                 "hidden_size >= 1, 0 <= dropout < 1",
                     MAX_LAYERS);
        goto fail;
    }
    const char *path;
    double fraction;
    int64_t workers, vocab_size;
    if (read_data_config(ctx, t, &path, &fraction, &workers, &vocab_size) != CT_OK) goto fail;
    t->workers = (int)workers;
    if (path != g_run.text_path && !(t->train_shards && g_run.text_flag))
        snprintf(g_run.text_path, sizeof g_run.text_path, "%s", path);
    if (!t->train_shards) {
        if (text_load(&t->text, g_run.text_path) != CT_OK) goto fail;
        t->n_train = (int64_t)((double)t->text.n * fraction); /* n = int(0.9 * len(data)) */
        vocab_size = t->text.vocab_size;
    } else if (g_run.sampling) { /* the shards hold indices: the text gives their characters */
        if (text_load(&t->text, g_run.text_path) != CT_OK) goto fail;
        if (t->text.vocab_size != vocab_size) {
            ct_set_error(CT_ECONFIG, "%s has %d distinct characters, but the model was trained on shards with "
                                     "data.vocab_size %" PRId64 ": sample with --data and the text the shards "
                                     "were written from",
                         g_run.text_path, t->text.vocab_size, vocab_size);
            goto fail;
        }
    }
    t->cfg.vocab_size = t->rnn.vocab_size = vocab_size;

    t->model = ct_ctx_wrap_model(ctx, t->exported ? exported_new(ctx, t, model_file)
                                      : t->lstm    ? rnn_model_new(&t->rnn)
                                                   : gpt_new(&t->cfg));
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, adamw_new(t->model, &adamw, fused)) : NULL;
    if (!t->opt || use_amp(ctx, amp) != CT_OK) goto fail;
    return t;
fail:
    charlm_destroy(t);
    return NULL;
}

static ct_loader *build_training_data_loader(void *self, ct_context *ctx) {
    CharLM *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = true;
    o.seed = ct_ctx_trial_seed(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx);
    o.pin_memory = o.device.type == CT_CUDA; /* page-locked: the copy to the GPU runs asynchronously */
    if (t->train_shards) { /* every offset of every shard, shuffled by the loader */
        ct_shards_opts so = ct_shards_defaults();
        so.block_size = t->cfg.block_size;
        so.vocab_size = t->cfg.vocab_size;
        return ct_loader_new(ct_dataset_shards((const char *const *)t->train_shards, t->n_train_shards, &so), &o);
    }
    return ct_loader_new(windows_new(t->text.ids, t->n_train, t->cfg.block_size, 1), &o);
}

static ct_loader *build_validation_data_loader(void *self, ct_context *ctx) {
    CharLM *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx); /* evaluate_full_dataset: the loader brings batches itself */
    o.pin_memory = o.device.type == CT_CUDA;
    int64_t T = t->cfg.block_size;
    if (t->val_shards) { /* the shards' non-overlapping windows */
        ct_shards_opts so = ct_shards_defaults();
        so.block_size = T;
        so.windows = CT_WINDOWS_SEQUENTIAL;
        so.vocab_size = t->cfg.vocab_size;
        return ct_loader_new(ct_dataset_shards((const char *const *)t->val_shards, t->n_val_shards, &so), &o);
    }
    return ct_loader_new(windows_new(t->text.ids + t->n_train, t->text.n - t->n_train, T, T), &o);
}

/* The clip_grads callback of step_optimizer. */
static int clip_grads(ct_tensor *const *params, size_t n, void *ctx) {
    const CharLM *t = ctx;
    return ct_clip_grad_norm(n, params, t->grad_clip, 2.0, NULL);
}

/* model(x)'s logits, [B, T, V]: the GPT returns them; the RNNModel returns
 * (logits, hidden), so it is called as Python calls it: logits, _ = model(x). */
static ct_tensor *logits_of(const CharLM *t, ct_module *model, const ct_tensor *x) {
    if (!t->lstm && !t->exported) return ct_nn_forward(model, x);
    ct_value *out = ct_nn_callf(model, "t", x); /* NULL x: keeps the error that made it */
    ct_value_kind k = out ? ct_value_kind_of(out) : CT_VALUE_NONE; /* an exported model may return either */
    const ct_value *first = k == CT_VALUE_TUPLE || k == CT_VALUE_LIST ? ct_value_list_get(out, 0) : out;
    ct_tensor *logits = first ? ct_alias(ct_value_get_tensor(first)) : NULL;
    ct_value_free(out);
    return logits;
}

/* F.cross_entropy(logits.view(-1, V), y.view(-1), reduction=r) */
static ct_tensor *lm_loss(CharLM *t, const ct_value *batch, ct_reduction r) {
    ct_tensor *x = ct_batch_at(batch, 0), *y = ct_batch_at(batch, 1);
    ct_tensor *logits = logits_of(t, t->model, x);
    ct_cross_entropy_opts ce = ct_cross_entropy_defaults();
    ce.reduction = r;
    return ct_cross_entropy_ex(ct_view(logits, CT_SHAPE(-1, t->cfg.vocab_size)), ct_view(y, CT_SHAPE(-1)), &ce);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    CharLM *t = self;
    ct_tensor *loss = lm_loss(t, batch, CT_REDUCE_MEAN);
    if (!loss || ct_ctx_backward(ctx, loss) ||
        ct_ctx_step_optimizer(ctx, t->opt, t->grad_clip > 0 ? clip_grads : NULL, t))
        return NULL;
    return ct_value_tensor(loss);
}

/* The mean loss per character over the validation windows, summed on the
 * device and read once. */
static ct_value *evaluate_full_dataset(void *self, ct_context *ctx, ct_loader *loader) {
    CharLM *t = self;
    ct_tensor *total = NULL; /* kept outside the per-batch scopes */
    int64_t tokens = 0;
    int got = ct_loader_reset(loader);
    ct_value *batch = NULL;
    while (got == CT_OK && (got = ct_loader_next(loader, &batch)) == 1) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *sum = lm_loss(t, batch, CT_REDUCE_SUM);
        ct_tensor *next = total ? ct_add(total, sum) : ct_clone(sum);
        tokens += ct_numel(ct_batch_at(batch, 1));
        ct_keep(next);
        ct_scope_end(s);
        ct_tensor_free(total);
        total = next;
        ct_value_free(batch);
        got = next ? CT_OK : -1;
    }
    double loss = NAN;
    int rc = got < 0 ? ct_last_code() : total ? ct_item(total, &loss) : ct_set_error(CT_ETRIAL, "no validation windows");
    ct_tensor_free(total);
    if (rc != CT_OK) return NULL;
    loss /= (double)tokens;
    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "validation_loss", ct_value_float(loss));
    ct_value_dict_set(metrics, "validation_perplexity", ct_value_float(exp(loss)));
    return metrics;
}

/* Remembers the checkpoints rank 0 writes: the last one is sampled from
 * once ct_main returns. */
static int remember_checkpoint(void *self, ct_context *ctx, const char *dir) {
    if (ct_ctx_rank(ctx) == 0) {
        snprintf(g_run.checkpoint, sizeof g_run.checkpoint, "%s", dir);
        ct_device_format(ct_ctx_device(ctx), g_run.device, sizeof g_run.device);
    }
    return CT_OK;
}

static int build_callbacks(void *self, ct_context *ctx) {
    return ct_ctx_add_callback(ctx, &(ct_callback){.name = "last_checkpoint",
                                                   .on_checkpoint_write_end = remember_checkpoint});
}

static const ct_trial charlm = {
    .name = "charlm",
    .init = charlm_init,
    .destroy = charlm_destroy,
    .build_training_data_loader = build_training_data_loader,
    .build_validation_data_loader = build_validation_data_loader,
    .train_batch = train_batch,
    .evaluate_full_dataset = evaluate_full_dataset,
    .build_callbacks = build_callbacks,
};

/* ---- sampling ------------------------------------------------------------- */

/* nanoGPT's generate(): crop the context to block_size, take the last
 * position's logits / temperature, softmax, draw one (argmax when the
 * temperature is 0), append. The prompt (default: the first character of
 * the vocabulary, "\n" for shakespeare, unprinted) starts the context. */
static int generate(ct_context *ctx, const char *prompt, int64_t n_tokens, double temperature, FILE *out) {
    CharLM *t = ct_ctx_self(ctx);
    ct_module *model = ct_ctx_model(ctx, 0);
    ct_device dev = ct_ctx_device(ctx);
    int64_t T = t->cfg.block_size, len = 0, cap = (int64_t)strlen(prompt) + n_tokens + 1;
    int64_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return ct_set_error(CT_ENOMEM, "charlm: out of memory");
    for (const char *p = prompt; *p; p++) {
        int id = t->text.stoi[(uint8_t)*p];
        if (id < 0) {
            free(ids);
            return ct_set_error(CT_EINVAL, "the prompt's character '%c' (byte %d) is not in the vocabulary", *p,
                                (uint8_t)*p);
        }
        ids[len++] = id;
    }
    if (len == 0) ids[len++] = 0;
    else fputs(prompt, out);
    int rc = CT_OK;
    ct_guard *g = ct_no_grad();
    for (int64_t i = 0; rc == CT_OK && i < n_tokens; i++) {
        ct_scope *s = ct_scope_begin();
        int64_t L = len < T ? len : T;
        ct_tensor *idx = ct_to_device(ct_from_data(ids + len - L, CT_SHAPE(1, L), CT_I64), dev, false);
        if (t->static_length && L < T) /* the exported model takes T tokens: pad the context on the left */
            idx = ct_cat(2, (ct_tensor *[]){ct_zeros(CT_SHAPE(1, T - L), &(ct_topts){.dtype = CT_I64,
                                                                                          .device = dev}),
                                                  idx}, 1);
        int64_t last = t->static_length ? T - 1 : L - 1;
        ct_tensor *logits = ct_select(ct_select(logits_of(t, model, idx), 0, 0), 0, last); /* [V] */
        ct_tensor *next = temperature > 0
                              ? ct_multinomial(ct_softmax(ct_div_scalar(logits, temperature), -1), 1, false)
                              : ct_argmax(logits, 0, false);
        rc = ct_item_int(next, &ids[len]);
        ct_scope_end(s);
        if (rc == CT_OK) fputc(t->text.itos[ids[len++]], out);
    }
    ct_guard_end(g);
    fputc('\n', out);
    fflush(out);
    free(ids);
    return rc;
}

static int sample_from(const char *dir, const char *device, const char *prompt, int64_t n_tokens,
                       double temperature, uint64_t seed) {
    ct_context *ctx = NULL;
    g_run.sampling = true;
    int rc = ct_load_trial_from_checkpoint(dir, &charlm, NULL, device, &ctx);
    if (rc == CT_OK) rc = ct_manual_seed(seed);
    if (rc == CT_OK) {
        fprintf(stderr, "charlm: sampling %" PRId64 " characters from %s (temperature %g, seed %" PRIu64 ")\n",
                n_tokens, dir, temperature, seed);
        rc = generate(ctx, prompt, n_tokens, temperature, stdout);
    }
    ct_ctx_free(ctx);
    return rc;
}

static int usage(const char *prog, int code) {
    fprintf(code ? stderr : stdout,
            "usage: %s [ct_main flags]        train (--help lists the flags)\n"
            "       %s sample CHECKPOINT_DIR [--tokens N] [--temperature T] [--seed S]\n"
            "                 [--prompt TEXT] [--device cpu|cuda] [--data TEXT_FILE]\n"
            "sample prints N characters (default 500) drawn from the model, temperature 0.8\n"
            "(0: always the likeliest), seed 0, on the cpu, from the text at\n" DEFAULT_TEXT "\n"
            "       %s shard TEXT_FILE OUT_DIR [--shard-tokens N] [--train-fraction F]\n"
            "shard writes the text's characters as vocabulary indices in llm.c's token shards:\n"
            "the first 90%% as OUT_DIR/charlm_train_NNNNNN.bin, the rest as charlm_val_NNNNNN.bin,\n"
            "at most N tokens a shard (default 100000000, llm.c's)\n",
            prog, prog, prog);
    return code;
}

static int sample_main(int argc, char **argv) {
    if (argc < 3 || argv[2][0] == '-') return usage(argv[0], argc > 2 && !strcmp(argv[2], "--help") ? 0 : 2);
    const char *device = "cpu", *prompt = "";
    int64_t tokens = 500;
    double temperature = 0.8;
    uint64_t seed = 0;
    for (int i = 3; i < argc; i++) {
        const char *flag = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        errno = 0;
        if (!val) return usage(argv[0], 2);
        if (!strcmp(flag, "--tokens")) tokens = strtoll(val, &end, 10);
        else if (!strcmp(flag, "--temperature")) temperature = strtod(val, &end);
        else if (!strcmp(flag, "--seed")) seed = strtoull(val, &end, 10);
        else if (!strcmp(flag, "--prompt")) prompt = val;
        else if (!strcmp(flag, "--device")) device = val;
        else if (!strcmp(flag, "--data")) {
            snprintf(g_run.text_path, sizeof g_run.text_path, "%s", val);
            g_run.text_flag = true;
        }
        else return usage(argv[0], 2);
        if ((end && (*end || errno || end == val)) || tokens < 0 || !(temperature >= 0)) {
            fprintf(stderr, "charlm sample: bad value '%s' for %s\n", val, flag);
            return 2;
        }
        i++;
    }
    if (sample_from(argv[2], device, prompt, tokens, temperature, seed) != CT_OK) {
        fprintf(stderr, "charlm sample: %s: %s\n", ct_strerror(ct_last_code()), ct_last_error());
        return ct_exit_code(ct_last_code());
    }
    return 0;
}

/* The tokens ids[0:n] as shards OUT/charlm_SPLIT_000000.bin, ... of at most
 * `per` tokens each; returns the number of shards or a negative code. */
static int write_shards(const uint8_t *ids, int64_t n, int64_t per, const char *out, const char *split) {
    uint32_t *buf = malloc((size_t)(per < n ? per : n) * sizeof *buf);
    if (!buf) return ct_set_error(CT_ENOMEM, "charlm: out of memory");
    int k = 0, rc = CT_OK;
    for (int64_t at = 0; rc == CT_OK && at < n; at += per, k++) {
        int64_t len = n - at < per ? n - at : per;
        for (int64_t i = 0; i < len; i++) buf[i] = ids[at + i];
        char path[4200];
        snprintf(path, sizeof path, "%s/charlm_%s_%06d.bin", out, split, k);
        rc = ct_shard_write(path, buf, len, 2);
    }
    free(buf);
    return rc == CT_OK ? k : rc;
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c) continue;
        char keep = *c;
        *c = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return ct_set_error(CT_EIO, "cannot create %s: %s", p, strerror(errno));
        if (!(*c = keep)) return CT_OK;
    }
}

/* charlm shard TEXT OUT_DIR: the text's vocabulary indices (the tokens
 * training from the text sees) as llm.c's uint16 shards, split as training
 * splits the text. */
static int shard_main(int argc, char **argv) {
    if (argc < 4 || argv[2][0] == '-' || argv[3][0] == '-')
        return usage(argv[0], argc > 2 && !strcmp(argv[2], "--help") ? 0 : 2);
    int64_t per = 100000000;
    double fraction = 0.9;
    for (int i = 4; i < argc; i += 2) {
        const char *flag = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        errno = 0;
        if (!val) return usage(argv[0], 2);
        if (!strcmp(flag, "--shard-tokens")) per = strtoll(val, &end, 10);
        else if (!strcmp(flag, "--train-fraction")) fraction = strtod(val, &end);
        else return usage(argv[0], 2);
        if (*end || errno || end == val || per < 1 || per > INT32_MAX || !(fraction > 0 && fraction < 1)) {
            fprintf(stderr, "charlm shard: bad value '%s' for %s\n", val, flag);
            return 2;
        }
    }
    Text text = {0};
    int rc = text_load(&text, argv[2]);
    if (rc == CT_OK) rc = make_dirs(argv[3]);
    int64_t n_train = (int64_t)((double)text.n * fraction); /* as training from the text splits it */
    int train = rc == CT_OK ? write_shards(text.ids, n_train, per, argv[3], "train") : rc;
    int val = train >= 0 ? write_shards(text.ids + n_train, text.n - n_train, per, argv[3], "val") : train;
    free(text.ids);
    if (val < 0) {
        fprintf(stderr, "charlm shard: %s: %s\n", ct_strerror(ct_last_code()), ct_last_error());
        return ct_exit_code(ct_last_code());
    }
    printf("charlm shard: %s: %d characters; %" PRId64 " training tokens in %d shard(s), %" PRId64
           " validation tokens in %d shard(s) under %s\n"
           "train from them with the config's\n"
           "  \"data\": {\"train_shards\": \"%s/charlm_train_*.bin\", \"val_shards\": \"%s/charlm_val_*.bin\",\n"
           "           \"vocab_size\": %d, \"path\": \"%s\"}\n",
           argv[2], text.vocab_size, n_train, train, text.n - n_train, val, argv[3], argv[3], argv[3],
           text.vocab_size, argv[2]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "sample") == 0) return sample_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "shard") == 0) return shard_main(argc, argv);
    int rc = ct_main(argc, argv, &charlm);
    /* Trained: sample from the checkpoint the run ended with (rank 0). */
    if (rc == CT_EXIT_OK && g_run.checkpoint[0] && g_run.sample_tokens > 0) {
        printf("---- sample (%" PRId64 " characters, temperature %g) ----\n", g_run.sample_tokens, g_run.temperature);
        fflush(stdout);
        if (sample_from(g_run.checkpoint, g_run.device, "", g_run.sample_tokens, g_run.temperature, 0) != CT_OK) {
            fprintf(stderr, "charlm: sampling: %s\n", ct_last_error());
            rc = ct_exit_code(ct_last_code());
        }
    }
    return rc;
}
