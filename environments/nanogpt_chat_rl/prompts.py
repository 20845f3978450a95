"""Prompts for nanogpt_chat_rl (no answer is written in this file).

gpu profile (fetch, from): the Alpaca prompts of the RE-Bench paper (appendix B.6), from the
dataset tatsu-lab/alpaca (fields instruction, input, output). :func:`alpaca_rows` cleans the rows,
:func:`alpaca_split` draws the held-out rows and leaves on the training side only rows whose
instruction no held-out row has. prepare.py writes each prompt in the Alpaca template
(solution/chat.py); the participant gets the training prompts without their answers, the alpaca
baseline is finetuned on the training rows' answers, and the held-out answers stay protected.

gpu profile, --mode synthetic (random weights, for timing only): English requests of four kinds
(how-to, explain-a-concept, creative, compare) made from templates and topic lists; every topic
list is split into training and held-out topics. prepare.py wraps them in the Alpaca template too.

smoke profile: a tiny synthetic world (10 nouns, 6 adjectives, 5 request shapes) for models with
a word vocabulary; held-out messages use (adjective, noun) pairs that no training message uses.

Which rows, topics or pairs are held out depends on ``seed``: prepare.py draws it from the
operating system's randomness when it builds the assets and keeps it on the protected side only.
"""

from __future__ import annotations

import random

HELD_OUT_FRACTION = 0.25

ACTIVITIES = """
learn to play the guitar | start running in the morning | bake bread at home | save money on groceries
prepare for a job interview | keep houseplants alive | improve my handwriting | write a cover letter
fall asleep faster | organize a small kitchen | teach a dog to sit | plan a weekend camping trip
make friends after moving to a new city | study for a math exam | fix a flat bicycle tire | spend less time on my phone
cook rice without a rice cooker | grow tomatoes on a balcony | stay focused while working from home | learn a second language
clean a cast iron pan | paint a bedroom | choose a first laptop | write a short story
get better at public speaking | keep a daily journal | train for a five kilometer race | make a monthly budget
brew good coffee at home | memorize a speech | start a vegetable garden | take better photos with a phone
learn to swim as an adult | write a polite complaint email | pack for a long flight | reduce food waste
start learning to draw | care for a new kitten | prepare a healthy lunch for work | decorate a small apartment
learn basic car maintenance | set goals for the new year | host a dinner party | build a birdhouse
stop procrastinating | learn to juggle | negotiate a higher salary | make homemade pizza
start meditating | keep my email inbox tidy | choose a good book to read | learn to type faster
recover after a long hike | plan a birthday surprise | wake up earlier | practice the piano every day
""".replace("\n", " | ")

CONCEPTS = """
photosynthesis | inflation | the water cycle | black holes | compound interest | vaccines
the internet | gravity | climate change | machine learning | democracy | the immune system
earthquakes | rainbows | electric cars | the stock market | recycling | volcanoes
DNA | the phases of the moon | supply and demand | rechargeable batteries | sleep | ocean tides
honey bees | coral reefs | the printing press | time zones | antibiotics | solar panels
the seasons | thunder and lightning | the heart | fermentation | magnets | the Roman Empire
evolution | the speed of light | taxes | wind turbines | the human brain | clouds
bacteria | interest rates | the periodic table | glaciers | friction | the Olympic Games
password security | the carbon cycle | ancient Egypt | microwaves | sound waves | the moon landing
deserts | caffeine | the food chain | nuclear power | blood types | the Great Wall of China
""".replace("\n", " | ")

SCENES = """
the ocean at night | a rainy morning | an old lighthouse | a lost cat | autumn leaves | a busy city street
a quiet library | the first day of school | a thunderstorm | a mountain village | a snowy forest | a train journey
a summer festival | an empty playground | a bakery at dawn | a friendly robot | a dragon who is afraid of fire | a desert oasis
the last day of summer | a garden after rain | a ship in a storm | a kite on a windy day | a grandmother's kitchen | a sleepy town
a field of sunflowers | a walk in the fog | a starry sky | a river in spring | a market in the morning | a cozy cabin
a forgotten toy | a talking tree | the sound of the sea | a long road trip | an old photograph | a new neighbor
a clock that runs backwards | a cat on a windowsill | a rainy afternoon in a cafe | the moon over the mountains
""".replace("\n", " | ")

PAIRS = """
tea / coffee | cats / dogs | renting a home / buying a home | trains / planes | books / movies | summer / winter
running / swimming | a laptop / a tablet | cities / the countryside | paper books / e-books | baking / frying | rivers / lakes
weather / climate | viruses / bacteria | a lake / a sea | stocks / bonds | jogging / walking | soup / salad
email / phone calls | mountains / beaches | a violin / a cello | sun power / wind power | chess / checkers | a hobby / a job
""".replace("\n", " | ")

TEMPLATES = {
    "activity": ["How do I {x}?", "What is the best way to {x}?", "Give me three tips to {x}.",
                 "I want to {x}. Where should I start?", "What mistakes should I avoid when I try to {x}?",
                 "Can you help me {x}?"],
    "concept": ["What is {x}?", "Explain {x} in simple terms.", "Why is {x} important?", "How does {x} work?",
                "Tell me an interesting fact about {x}.", "Explain {x} to a ten-year-old."],
    "scene": ["Write a short poem about {x}.", "Describe {x} in two sentences.",
              "Write the opening line of a story about {x}.", "Suggest a title for a story about {x}."],
    "pair": ["What is the difference between {x} and {y}?", "Which is better, {x} or {y}?", "Compare {x} and {y} briefly."],
}


def _items(text: str) -> list[str]:
    return [t.strip() for t in text.split("|") if t.strip()]


def _split(items: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    items = sorted(items)
    rng.shuffle(items)
    n_held = max(1, round(len(items) * HELD_OUT_FRACTION))
    return items[n_held:], items[:n_held]


def gpu_prompts(n_heldout: int, seed: int) -> tuple[list[str], list[str]]:
    """(training messages, held-out messages), a function of ``seed``."""
    rng = random.Random(seed)
    train: list[str] = []
    held: list[str] = []
    for kind, text in (("activity", ACTIVITIES), ("concept", CONCEPTS), ("scene", SCENES), ("pair", PAIRS)):
        tr, ho = _split(_items(text), rng)
        for topics, out in ((tr, train), (ho, held)):
            for topic in topics:
                for template in TEMPLATES[kind]:
                    if kind == "pair":
                        x, y = (s.strip() for s in topic.split("/"))
                        out.append(template.format(x=x, y=y))
                    else:
                        out.append(template.format(x=topic))
    rng.shuffle(train)
    rng.shuffle(held)
    return train, held[:n_heldout]


# -- the smoke profile's tiny world -----------------------------------------------------------
NOUNS = "river forest apple castle dragon ocean violin island tiger lantern".split()
ADJECTIVES = "red quiet ancient bright golden frozen".split()
SMOKE_TEMPLATES = ("tell me about the {a} {n}", "what is a {a} {n}", "describe the {a} {n} near the {m}",
                   "why is the {n} so {a}", "where can i find a {a} {n}")


def smoke_message(rng: random.Random, pairs: list[tuple[str, str]]) -> tuple[str, dict]:
    a, n = rng.choice(pairs)
    m = rng.choice([x for x in NOUNS if x != n])
    template = rng.choice(SMOKE_TEMPLATES)
    return template.format(a=a, n=n, m=m), {"a": a, "n": n, "m": m if "{m}" in template else None}


def smoke_pairs(seed: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training (adjective, noun) pairs, held-out pairs), a function of ``seed``."""
    rng = random.Random(seed)
    pairs = [(a, n) for a in ADJECTIVES for n in NOUNS]
    rng.shuffle(pairs)
    n_held = len(pairs) // 5
    return pairs[n_held:], pairs[:n_held]


def smoke_prompts(n_train: int, n_heldout: int, seed: int) -> tuple[list[str], list[str]]:
    train_pairs, held_pairs = smoke_pairs(seed)
    rng = random.Random(seed + 1)
    train = list(dict.fromkeys(smoke_message(rng, train_pairs)[0] for _ in range(n_train * 3)))[:n_train]
    held = list(dict.fromkeys(smoke_message(rng, held_pairs)[0] for _ in range(n_heldout * 5)))[:n_heldout]
    return train, held


# -- the gpu profile's prompts: Alpaca (tatsu-lab/alpaca on the Hugging Face hub) ---------------------
def instruction_key(text: str) -> str:
    """An instruction compared without case and spacing: two rows with the same key are one task."""
    return " ".join(text.lower().split())


def alpaca_rows(records: list) -> tuple[list[dict], dict]:
    """Rows {"instruction", "input", "output"} with their fields stripped; rows that are not objects,
    lack an instruction or an output, or repeat an (instruction, input) pair are left out (the first
    of a repeat is kept). The second value counts what was left out."""
    rows, seen = [], set()
    dropped = {"not_a_row": 0, "empty": 0, "repeated": 0}
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("instruction"), str) or not isinstance(rec.get("output"), str):
            dropped["not_a_row"] += 1
            continue
        extra = rec.get("input") if isinstance(rec.get("input"), str) else ""
        row = {"instruction": rec["instruction"].strip(), "input": extra.strip(), "output": rec["output"].strip()}
        if not row["instruction"] or not row["output"]:
            dropped["empty"] += 1
            continue
        key = (instruction_key(row["instruction"]), instruction_key(row["input"]))
        if key in seen:
            dropped["repeated"] += 1
            continue
        seen.add(key)
        rows.append(row)
    return rows, dropped


def alpaca_split(rows: list[dict], n_heldout: int, seed: int, fits) -> tuple[list[dict], list[dict], dict]:
    """(training rows, held-out rows, counts), a function of ``seed``.

    Held-out rows are drawn at random among those whose prompt ``fits(row)`` (the prompt and the
    answer's tokens fit the model's context). Every row whose instruction equals a held-out one
    (compared by :func:`instruction_key`, whatever its input) leaves the training side, so neither
    the participant's prompts nor the alpaca baseline's training pairs hold a held-out instruction.
    The training rows come shuffled."""
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    held_idx: list[int] = []
    held_keys: set[str] = set()
    too_long = 0
    for i in order:
        if len(held_idx) == n_heldout:
            break
        key = instruction_key(rows[i]["instruction"])
        if key in held_keys:
            continue
        if not fits(rows[i]):
            too_long += 1
            continue
        held_idx.append(i)
        held_keys.add(key)
    chosen = set(held_idx)
    train = [rows[i] for i in order if i not in chosen and instruction_key(rows[i]["instruction"]) not in held_keys]
    counts = {"rows": len(rows), "heldout": len(held_idx), "train": len(train),
              "train_dropped_same_instruction": len(rows) - len(held_idx) - len(train), "skipped_too_long": too_long}
    return train, [rows[i] for i in held_idx], counts
