import CCSEngine
import CCSProtocol
import PushDomain
import Hummingbird

/// Device groups in the admin API (docs/admin-api.md): a sender's groups with their members, and
/// (in `GET /emulator/v1/devices/:token`) the groups a device belongs to.
extension AdminAPI {
    func addDeviceGroupRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.get("senders/:sender/groups") { _, context in
            let sender = try context.parameters.require("sender")
            let groups = self.engine.deviceGroups(sender: sender).map(Self.groupJSON)
            return JSONResponse.make(.object(["sender_id": .string(sender), "groups": .array(groups)]))
        }
    }

    static func groupJSON(_ g: DeviceGroupView) -> JSONValue {
        .object([
            "sender_id": .string(g.senderID), "notification_key_name": .string(g.name),
            "notification_key": .string(g.notificationKey), "members": .array(g.members.map { .string($0) }),
            "created_at": .int(g.createdAt),
        ])
    }

    /// A device's groups, without the other members (the device's view of them).
    func deviceGroupsJSON(token: String) -> JSONValue {
        .array(engine.deviceGroups(token: token).map { g in
            .object(["sender_id": .string(g.senderID), "notification_key_name": .string(g.name),
                     "notification_key": .string(g.notificationKey)])
        })
    }
}
