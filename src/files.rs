//! Files a configuration names (API keys, TLS material, tokenizers, datasets): read once,
//! checked to be what they claim, bounded in size.

use std::path::Path;

/// Read a file the configuration names: only a regular file (a device or a FIFO, such as
/// `/dev/zero` or `/dev/stdin`, would hang the load or exhaust memory) of at most `limit`
/// bytes. Symlinks are followed: Kubernetes mounts Secrets and ConfigMaps through them.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("cannot read {name}: {e}{}", mount_hint(path)),
        _ => format!("cannot read {name}: {e}"),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name} is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{name} is larger than {limit} bytes"));
    }
    Ok(bytes)
}

/// [`read_file`] for text.
pub(crate) fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read_file(path, limit)?)
        .map_err(|_| format!("{} is not valid UTF-8", path.display()))
}

/// Why a file under a Kubernetes Secret or ConfigMap volume is missing, where its directory
/// tells: the kubelet writes a volume's keys through a `..data` link, and leaves an
/// `optional` volume empty while the object it names does not exist. Without this the
/// error names a path in the pod, and the operator has to work out which Secret it is.
fn mount_hint(path: &Path) -> String {
    let (Some(dir), Some(key)) = (path.parent(), path.file_name()) else {
        return String::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return String::new();
    };
    let names: Vec<String> = entries
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    let key = key.to_string_lossy();
    let dir = dir.display();
    if names.is_empty() {
        format!(
            "; {dir} is empty: on Kubernetes, the Secret (or ConfigMap) an optional volume mounts there does not exist: create it with the key `{key}`"
        )
    } else if names.iter().any(|n| n == "..data") {
        let mut keys: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !n.starts_with(".."))
            .collect();
        keys.sort_unstable();
        format!(
            "; the Secret (or ConfigMap) mounted at {dir} has no key `{key}` (its keys: {})",
            keys.join(", ")
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::read_file;

    #[test]
    fn a_missing_key_file_says_which_mount_lacks_what() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("secrets");
        std::fs::create_dir(&secrets).unwrap();
        // An optional Secret volume whose Secret does not exist: an empty directory.
        let err = read_file(&secrets.join("api-key"), 64).unwrap_err();
        assert!(err.contains("is empty: on Kubernetes"), "{err}");
        assert!(err.contains("with the key `api-key`"), "{err}");
        // The Secret exists under other keys: the kubelet's `..data` link and the keys.
        std::fs::create_dir(secrets.join("..2026_11_28")).unwrap();
        std::os::unix::fs::symlink("..2026_11_28", secrets.join("..data")).unwrap();
        std::fs::write(secrets.join("token"), "x").unwrap();
        let err = read_file(&secrets.join("api-key"), 64).unwrap_err();
        assert!(
            err.contains("has no key `api-key` (its keys: token)"),
            "{err}"
        );
        // A plain directory says nothing it cannot know.
        let err = read_file(&dir.path().join("nope"), 64).unwrap_err();
        assert!(!err.contains("Secret"), "{err}");
    }
}
