"""Models of the export tests (test_export.py, and examples/exported's
checks): the kinds of module a user brings from Python, each exported by
the test itself. torchvision's resnet18 and mobilenet_v3_small come from
torchvision."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT(nn.Module):
    """A GPT with causal F.scaled_dot_product_attention and the output
    layer tied to the token embedding (nanoGPT's layout)."""

    def __init__(self, vocab=65, block=32, n_embd=64, n_head=4, n_layer=2, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class ViT(nn.Module):
    """A small vision transformer: a patch embedding, a class token,
    nn.TransformerEncoder (batch_first, dropout), a linear head."""

    def __init__(self, channels=3, image=32, patch=4, dim=64, depth=2, heads=4, classes=10, dropout=0.1):
        super().__init__()
        self.patch = nn.Conv2d(channels, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])


class LSTMLM(nn.Module):
    """An nn.LSTM language model (int64 tokens [N, T] -> logits [N, T, V])."""

    def __init__(self, vocab=65, emb=32, hidden=64, layers=2, dropout=0.2):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, layers, dropout=dropout, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, idx):
        y, _ = self.lstm(self.emb(idx))
        return self.out(y)


class Fancy(nn.Module):
    """What a team's own module does besides layers: several inputs and a
    keyword, dict and tuple outputs, a torch.no_grad() block, a tensor made
    in forward (a lifted constant), a buffer updated in place, a size
    computed from the dynamic batch, a frozen parameter and a
    non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.scale = nn.Parameter(torch.tensor([1.5]), requires_grad=False)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("offset", torch.linspace(-1, 1, 4), persistent=False)

    def forward(self, x, mask, *, temperature=2.0):
        with torch.no_grad():
            ref = x.mean(dim=1, keepdim=True)
        self.count.add_(1)
        h = self.fc(x - ref) * self.scale + self.offset + torch.tensor([0.0, 1.0, 2.0, 3.0])
        h = h.masked_fill(~mask, 0.0) / temperature
        B = h.shape[0]
        flat = h.reshape(B * 2, 2)
        return {"logits": h, "parts": (flat.sum(dim=1), h.softmax(dim=-1))}
