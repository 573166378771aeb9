//! `ork init`: a Katalog to start from, with a sample CR: one CRD whose CRs each get a
//! Deployment and a Service from templates, a status field, and a comment on each part saying
//! what to change. It validates, and `ork simulate` reconciles its sample.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The operator's name: a DNS label (`shop`); its CRD's kind is made of it (`Shop`).
    #[arg(value_name = "NAME", default_value = "app")]
    name: String,
    /// The API group of its CRD.
    #[arg(long, value_name = "GROUP", default_value = "example.com")]
    group: String,
    /// Where to write katalog.yaml and samples/ (default: here); nothing there is overwritten.
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

const KATALOG: &str = r#"# The {name} operator: each {kind} gets a Deployment and a Service, and its status says
# where it is served. Check it with `ork validate`, try it with no cluster with
# `ork simulate -f katalog.yaml --cr samples/{name}.yaml`, run it on a local control plane
# with `ork dev -f katalog.yaml --apply-cr`. Every key: docs/katalog-reference.md.
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata:
  name: {name}
  description: One Deployment and one Service per {kind}.
spec:
  crds:
    {name}:
      # The custom resource: `ork dev` installs a CRD for it (spec and status keep any field).
      apiTypes:
        group: {group}
        version: v1
        kind: {kind}
        plural: {plural}
      crFiles: [samples/{name}.yaml]
      operatorBox:
        reconcile:
          # Reconciles at once.
          workers: 2
          # Applied on every reconcile, drift corrected; templates read the CR.
          onReconcile:
            deployments:
              - name: "{{ .metadata.name }}"
                image: '{{ .spec.image | default "nginx:1.27" }}'
                replicas: "{{ .spec.replicas | default 1 }}"
                port: 80
            services:
              - name: "{{ .metadata.name }}"
                port: 80
        emit:
          # Beside the Ready condition the runtime keeps.
          status:
            fields:
              - path: url
                value: "http://{{ .metadata.name }}.{{ .metadata.namespace }}.svc"
"#;

const SAMPLE: &str = "apiVersion: {group}/v1
kind: {kind}
metadata:
  name: sample
spec:
  image: nginx:1.27
  replicas: 2
";

pub fn init(args: InitArgs) -> anyhow::Result<ExitCode> {
    if !orkestra_expr::names::is_dns1123_label(&args.name) || args.name.len() > 40 {
        bail!(
            "{:?} cannot name an operator: a DNS label of at most 40 characters (lowercase letters, digits, '-')",
            args.name
        );
    }
    if !orkestra_expr::names::is_dns1123_subdomain(&args.group) || !args.group.contains('.') {
        bail!("--group {:?}: a DNS name with a dot (example.com)", args.group);
    }
    let kind = crate::scaffold::kind_of(&args.name);
    let fill = |text: &str| {
        text.replace("{name}", &args.name)
            .replace("{kind}", &kind)
            .replace("{plural}", &format!("{}s", kind.to_lowercase()))
            .replace("{group}", &args.group)
    };
    let files = [
        (args.dir.join("katalog.yaml"), fill(KATALOG)),
        (
            args.dir.join("samples").join(format!("{}.yaml", args.name)),
            fill(SAMPLE),
        ),
    ];
    for (path, _) in &files {
        if path.exists() {
            bail!("{} exists already; nothing was written", path.display());
        }
    }
    for (path, text) in &files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("making {}", parent.display()))?;
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
