//! Files a configuration names (API keys, TLS material, tokenizers, datasets): read once,
//! checked to be what they claim, bounded in size.

use std::path::Path;

/// Read a file the configuration names: only a regular file (a device or a FIFO, such as
/// `/dev/zero` or `/dev/stdin`, would hang the load or exhaust memory) of at most `limit`
/// bytes. Symlinks are followed: Kubernetes mounts Secrets and ConfigMaps through them.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
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
