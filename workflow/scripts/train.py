from lmcflow.jobs import run_train_bundle, set_threads
from lmcflow.logs import job_log

with job_log(snakemake.log[0]):
    set_threads(snakemake.threads)
    p = snakemake.params
    members = [{"point": point, "seed": seed, "ckpt": ckpt, "row": row}
               for point in p.points for seed, (ckpt, row) in p.models[point["point"]].items()]
    run_train_bundle(members, p.data, device=p.device, state_dir=p.state_dir)
