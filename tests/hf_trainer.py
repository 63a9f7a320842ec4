"""A tiny Hugging Face Trainer run, as a user's script is: it prints the Trainer's dicts on
stdout, a progress bar on stderr; nothing of tuimon in it. argv: SEED OUTPUT_DIR."""

import sys

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainingArguments,
    set_seed,
)

seed = int(sys.argv[1])
set_seed(seed)
torch.set_num_threads(1)
config = BertConfig(
    vocab_size=50,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
    num_labels=2,
)
model = BertForSequenceClassification(config)
g = torch.Generator().manual_seed(0)
ids = torch.randint(0, 50, (64, 8), generator=g)
labels = (ids.sum(1) % 2).long()


class DS(torch.utils.data.Dataset):
    def __len__(self):
        return len(ids)

    def __getitem__(self, i):
        return {"input_ids": ids[i], "labels": labels[i]}


args = TrainingArguments(
    output_dir=sys.argv[2],
    num_train_epochs=2,
    per_device_train_batch_size=8,
    logging_steps=2,
    eval_strategy="epoch",
    save_strategy="no",
    report_to=[],
    seed=seed,
    use_cpu=True,
    disable_tqdm=False,
)
Trainer(model=model, args=args, train_dataset=DS(), eval_dataset=DS()).train()
