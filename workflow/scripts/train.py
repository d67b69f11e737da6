from lmcflow.jobs.train import run_train_group
from lmcflow.kernels import start_job
from lmcflow.logs import job_log
from lmcflow.plan.kept import record_members

with job_log(snakemake.log[0]):
    start_job(snakemake.threads)  # what Snakemake gave the job: threads.train, capped by --cores
    p = snakemake.params
    points = {point["point"]: point for point in p.points}
    bundles = [[{"point": points[pid], "seed": seed, "ckpt": ckpt, "row": row}
                for pid in ids for seed, (ckpt, row) in p.models[pid].items()] for ids in p.bundles]
    run_train_group(bundles, p.data, device=p.device, state_dir=p.state_dir, stack_alone=p.stack_alone)
    record_members(snakemake.output[0], {seed for models in p.models.values() for seed in models})
