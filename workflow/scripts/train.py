from lmcflow.config import Point
from lmcflow.jobs import run_train_bundle, set_threads
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    point, out = Point.from_dict(snakemake.params.point), snakemake.output[0]
    members = [{"point": point, "seed": s, "ckpt": f"{out}/seed-{s}.safetensors", "row": f"{out}/seed-{s}.run.parquet"}
               for s in snakemake.params.seeds]
    run_train_bundle(members, {point.dataset: snakemake.input.data}, device=snakemake.params.device,
                     state_dir=snakemake.params.state_dir)
