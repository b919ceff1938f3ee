#!/usr/bin/env python3
"""The reference method, as published with the benchmarking method llmprobe
automates: the official `openai` SDK, AsyncOpenAI, stream=True with
stream_options={"include_usage": True}, TTFT taken at the first chunk that
carries content. Closed loop: `concurrency` workers, each sending its next
request as soon as the previous one ended, as llmprobe's levels do.

Run by the measurer bench (`cargo bench --bench measurer`) against the same
server and workload as llmprobe; it prints one JSON document on stdout:
CPU seconds of this process (user + sys, from getrusage) spent in the
measured requests, the content chunks they streamed, and per request its id
(sent as `user`, which the server echoes in its records) and TTFT.

Exits 3 with a reason on stderr when the SDK is not installed.
"""

import argparse
import asyncio
import json
import resource
import sys
import time


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


async def one(client, args, request_id):
    t0 = time.perf_counter()
    stream = await client.chat.completions.create(
        model=args.model,
        messages=[{"role": "user", "content": args.prompt}],
        max_completion_tokens=args.max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        user=request_id,
    )
    ttft = None
    chunks = 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            if ttft is None:
                ttft = time.perf_counter() - t0
            chunks += 1
    return ttft, chunks


async def level(client, args, prefix, n):
    next_index = 0
    results = []

    async def worker():
        nonlocal next_index
        while next_index < n:
            i = next_index
            next_index += 1
            request_id = f"{prefix}{i}"
            ttft, chunks = await one(client, args, request_id)
            results.append({"id": request_id, "ttft": ttft, "chunks": chunks})

    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    return results


async def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--model", default="bench-model")
    p.add_argument("--prompt", default="Write a haiku about capacity planning.")
    p.add_argument("--id-prefix", default="py-")
    args = p.parse_args()
    try:
        from openai import AsyncOpenAI
    except ImportError:
        print("the openai SDK is not installed (pip install openai)", file=sys.stderr)
        sys.exit(3)
    client = AsyncOpenAI(base_url=args.base_url, api_key="unused", max_retries=0)
    # Warm-up: opens the connections and loads the SDK's lazy parts; not counted.
    await level(client, args, args.id_prefix + "warm-", args.concurrency)
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    results = await level(client, args, args.id_prefix, args.requests)
    cpu1, wall1 = cpu_seconds(), time.perf_counter()
    import openai

    print(
        json.dumps(
            {
                "sdk_version": openai.__version__,
                "python": sys.version.split()[0],
                "cpu_seconds": cpu1 - cpu0,
                "wall_seconds": wall1 - wall0,
                "chunks": sum(r["chunks"] for r in results),
                "requests": results,
            }
        )
    )
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
